// Package podgc is kube-controller-manager's pod garbage collector as a
// ctrlhost descriptor: canonical name pod-garbage-collector-controller,
// alias podgc, enabled by "*".
//
// Every GCCheckPeriod (20s) one pass lists pods and nodes from the shared
// informers and force-deletes (grace period 0):
//   - terminated pods (phase other than Pending, Running and Unknown) beyond
//     --terminated-pod-gc-threshold, evicted pods first, then the oldest; a
//     threshold <= 0 turns this part off, as in KCM;
//   - terminating pods on nodes that are not Ready and carry the
//     node.kubernetes.io/out-of-service taint;
//   - pods bound to a node that has been missing from the node informer for
//     QuarantineTime (40s) and that a fresh GET confirms is gone;
//   - terminating pods that are bound to no node.
//
// Before deleting a pod whose phase is neither Succeeded nor Failed, the
// status is patched to phase Failed (with a DisruptionTarget=True condition,
// reason DeletionByPodGC, for pods of a deleted node), as KCM does, so that
// controllers that count failures (Job) see the pod as failed.
//
// Guarantees:
//   - A node is declared gone only after it has been missing from the
//     informer for a whole QuarantineTime and the API server answers NotFound
//     to a GET; a later pass restarts the quarantine for nodes that are found.
//   - The status patch and the delete both carry the pod's UID as a
//     precondition, so a pod recreated under the same name is never touched.
//   - A pod is acted on at most once per pass; errors are logged and the pod
//     is reconsidered on the next pass. Run returns only after every
//     goroutine of a pass has ended.
//
// Non-guarantees and differences from KCM:
//   - No Prometheus metrics (KCM exports pod_gc_* counters).
//   - Deletions within a pass run with bounded parallelism (KCM starts one
//     goroutine per pod), and the quarantine is a first-seen time per node
//     rather than a delaying work queue; the timing is the same.
//   - KCM's delete has no UID precondition; this one does.
//   - The pass is periodic, not event driven: a pod is collected up to one
//     GCCheckPeriod after it becomes eligible.
package podgc
