// Package replicaset is kube-controller-manager's ReplicaSet controller and
// its ReplicationController twin, as ctrlhost descriptors: Descriptor
// (replicaset-controller, alias replicaset, --concurrent-replicaset-syncs)
// and ReplicationControllerDescriptor (replicationcontroller-controller,
// alias replicationcontroller, --concurrent-rc-syncs). One implementation
// serves both; ReplicationControllers are converted to ReplicaSets on the
// way in and back on the way out.
//
// Guarantees, as upstream (Kubernetes 1.37):
//   - Expectations: after creating or deleting pods for an object, it is
//     not scaled again until the informer has shown those changes (or five
//     minutes passed), so a lagging watch never causes double creates or
//     deletes. Deletions are expected by pod name.
//   - Creates go in slow-start batches of 1, 2, 4, … and stop after the
//     first batch with a failure; at most 500 pods are created or deleted
//     per sync.
//   - Pods to delete are chosen as upstream ranks them: unscheduled, then
//     pending/unknown/running, not ready, lower pod-deletion-cost, more
//     sibling pods on the same node, more recently ready, more restarts,
//     newer.
//   - Orphans matching the selector are adopted (after an uncached re-read
//     of the owner, never while it is being deleted or after its UID
//     changed); owned pods that stop matching are released.
//   - Status: replicas, fullyLabeledReplicas, readyReplicas,
//     availableReplicas (minReadySeconds, with a requeue for when the next
//     pod becomes available), observedGeneration, the ReplicaFailure
//     condition (set on a failed create/delete, cleared by a clean sync) and,
//     for ReplicaSets only, terminatingReplicas.
//   - Event handlers only enqueue keys and update expectations; objects
//     from caches are never modified. A bad object (an invalid or empty
//     selector, a pod with malformed ownerReferences) gets a Warning event
//     and a permanent error for its key alone; other keys go on.
//
// Feature gates: DeploymentReplicaSetTerminatingReplicas and PodDeletionCost
// are read from the host's gate if it registers them; otherwise their 1.37
// defaults (both on) apply.
//
// Differences from upstream, and Non-guarantees:
//   - Stale-controller consistency (upstream's
//     StaleControllerConsistencyReplicaSet gate, beta in 1.37) is always on
//     and covers, as upstream does, the owner's own status write and every
//     pod it creates: after such a write, syncs of that key are skipped
//     (counted in workloop_stale_syncs_skipped_total) until the informer
//     delivers that resourceVersion, or for at most a minute. Pod deletes
//     return no object and are covered by expectations only. There is no
//     gate to turn it off.
//   - No replicaset_controller metrics (sorting_deletion_age_ratio, requeue
//     skips).
//   - An empty selector is refused with an event instead of selecting every
//     pod (the API server rejects such objects anyway).
//   - Pod co-location ranking also works for ReplicationControllers that
//     have a controller (upstream's index only understands ReplicaSets).
//   - The workqueue is named after the controller, not
//     "replicaset"/"replicationmanager". (Events carry KCM's sources:
//     replicaset-controller and replication-controller.)
package replicaset
