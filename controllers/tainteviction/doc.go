// Package tainteviction is kube-controller-manager's taint-eviction
// controller, native: a pod bound to a node with NoExecute taints it does
// not tolerate is deleted at once, and a pod that tolerates them for a
// while (tolerationSeconds) is deleted when the shortest of those
// tolerations runs out, unless the taints go first.
//
// Guarantees, as KCM v1.37 does it:
//   - names: taint-eviction-controller, no alias; no flag (KCM has none);
//     enabled by default; started only under the
//     SeparateTaintEvictionController gate (GA and locked on since 1.34);
//     its client is KCM's "node-controller" (the node lifecycle
//     controller's ServiceAccount, whose RBAC allows it); its events' source
//     is taint-eviction-controller;
//   - nodes and pods are watched: a node's add, delete, or a change of its
//     NoExecute taints (other effects are ignored); a pod's add, delete, or
//     a change of its node or of its tolerations (other changes, status
//     included, are ignored);
//   - for each pod bound to a node with NoExecute taints: if some taint has
//     no toleration that tolerates it, the pod's deletion starts at once
//     (a scheduled one is cancelled first); if the tolerations used set no
//     tolerationSeconds, any scheduled deletion is cancelled; otherwise the
//     deletion is scheduled the shortest tolerationSeconds (zero or fewer:
//     at once) after the taints were first seen, and a deletion already
//     scheduled stays as it is (KCM's rule: it moves only if it would come
//     later than now plus the toleration, which with a running clock it
//     never does). Which toleration matches a taint is the API's
//     Toleration.ToleratesTaint, the Lt/Gt operators under the
//     TaintTolerationComparisonOperators gate (alpha, off);
//   - a scheduled deletion is cancelled when the node loses its last
//     NoExecute taint, or the pod is deleted, and a cancelled one that was
//     waiting records a Normal TaintManagerEviction event "Cancelling
//     deletion of Pod <ns>/<name>"; a node's deletion cancels nothing (the
//     pods' deletions stand, as in KCM); pods not bound to a node are left
//     alone until they are;
//   - a deletion records a Normal TaintManagerEviction event "Marking for
//     deletion Pod <ns>/<name>", reads the pod from the API server, adds
//     the DisruptionTarget=True condition (reason DeletionByTaintManager,
//     message "Taint manager: deleting due to NoExecute taint", observed
//     generation the pod's) with a strategic-merge status patch carrying
//     the pod's UID as a precondition, unless the pod has that condition
//     already, then deletes the pod without preconditions or grace-period
//     override; it is tried five times, 10ms apart;
//   - metrics: taint_eviction_controller_pod_deletions_total and
//     taint_eviction_controller_pod_deletion_duration_seconds, KCM's names,
//     help and buckets, on the host's registry;
//   - stopping cancels the deletions still waiting and waits for those
//     running to return.
//
// Differences from KCM:
//   - one worker, on the kit's queue, instead of eight goroutines fed by
//     node and pod channels hashed by node name: a sync only reads caches
//     and schedules or cancels timers (deletions run on goroutines of their
//     own), and one worker keeps each node's taints and its pods' decisions
//     in order, which is what KCM's hashing is for. KCM also lets a node's
//     update overtake the pod updates waiting in its worker; here they are
//     taken in arrival order (the decisions are the same; a node's update
//     may wait behind pod updates queued before it);
//   - the deletion latency histogram is observed in seconds; KCM multiplies
//     the duration by a second before converting it, so its observations
//     are far beyond every bucket;
//   - a deletion that finishes after its pod's deletion was cancelled and
//     scheduled anew leaves the new one in place (KCM's forgets it);
//   - the controller adds the shared pods-by-node index itself (the one
//     the daemonset and node lifecycle controllers add too, kept once).
//     KCM's reads the spec.nodeName index of the shared pod informer
//     without adding it; the daemonset and node lifecycle controllers
//     add it: a KCM running this controller
//     without either finds no pod of a node, and acts on pod events only
//     (a node's new taints reach only pods added or changed later, and
//     the removal of its taints cancels nothing);
//   - a cache read that fails is retried with back-off (KCM logs it and
//     drops the event).
//
// Non-guarantees: a deletion that fails five times is logged and not
// retried until the node's taints or the pod's tolerations change, as in
// KCM; the toleration counts from when this controller first saw the
// taint, not from the taint's timeAdded, so a restart (or a failover)
// restarts every toleration's count, as in KCM; the pod is deleted with
// its own grace period, so it lingers, terminating, until its kubelet
// finishes it.
//
// Not sharded: a node's taints decide for every pod on it, and the
// toleration timers live in the process; sharding pods by UID would
// need every instance to watch every node, for little gain in a
// controller whose work is a few timers.
package tainteviction
