// Package ttl is kube-controller-manager's ttl controller, native: every
// node carries the node.alpha.kubernetes.io/ttl annotation, the number of
// seconds its kubelet may cache the Secrets and ConfigMaps of its pods
// before fetching them again, chosen from the size of the cluster.
//
// Guarantees, as KCM v1.37 does it:
//   - names: ttl-controller, alias ttl; five workers, a number no flag
//     changes; no flag (KCM has none); its client is KCM's
//     "ttl-controller" (the ServiceAccount under
//     --use-service-account-credentials, whose RBAC the API server
//     bootstraps: list, watch, update and patch of nodes);
//   - the size is counted from the node informer's adds and deletes, and
//     picks a band from KCM's table: up to 100 nodes 0s, then 15s up to
//     500, 30s up to 1000, 60s up to 2000, 300s beyond. The bands overlap
//     (15s from 90, 30s from 450, 60s from 900, 300s from 1800): the band
//     climbs when the count exceeds its top and falls when the count drops
//     below its bottom, one band per event, so 101 nodes give 15s and the
//     cluster keeps 15s until it is down to 89;
//   - an added node is counted before it is queued, so its sync sees a
//     band that includes it; every update queues its node; a delete only
//     counts; nothing is synced before the cache has synced;
//   - a node whose annotation is missing, not a whole number (strconv's
//     Atoi: "+15" and "015" read as 15), or not the band's TTL gets the
//     band's TTL through a strategic-merge patch of that one annotation;
//     nothing else is written, no event is recorded;
//   - a failed patch is retried with the controller rate limiter's
//     back-off, without end.
//
// Differences from KCM: the descriptor declares that the controller reads
// nothing of a node but its metadata (descriptor.WithReads), so a host
// whose other node readers declare as little caches less; the behaviour is
// the same. A panic in a sync is recovered and the node retried (KCM's
// process crashes).
//
// Non-guarantees: a change of band reaches the nodes that were already
// there only at their next update, as in KCM (kubelets update their node's
// status at least every --node-status-report-frequency, five minutes by
// default; a node without a kubelet keeps its old TTL until something
// writes it). The count is of the events this controller's informer
// delivered: after a relist it is the number of nodes the informer holds,
// and the band is the one reached by walking that count one event at a
// time, as in KCM.
//
// Not sharded: the band depends on the number of nodes in the whole
// cluster, which a shard seeing part of the nodes would count wrong; and
// one patch per node per band change is little work.
package ttl
