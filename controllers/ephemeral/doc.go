// Package ephemeral is kube-controller-manager's ephemeral-volume
// controller, native: every generic ephemeral volume of a pod gets its
// PersistentVolumeClaim, "<pod>-<volume>", made from the volume's
// template and controlled by the pod (the garbage collector deletes it
// with the pod).
//
// Guarantees, as KCM v1.37 does it:
//   - names: ephemeral-volume-controller, alias ephemeral-volume;
//     --concurrent-ephemeralvolume-syncs workers (default 5; 0 or less is
//     rejected by manager.Builder.Build, as KCM rejects it); its client is
//     KCM's "ephemeral-volume-controller" (the ServiceAccount under
//     --use-service-account-credentials, whose RBAC the API server
//     bootstraps); its events' source component is KCM's
//     "ephemeral_volume".
//   - a pod is synced when it is added, and when a claim it names is
//     deleted; pod updates and deletions are not watched (a pod's volumes
//     never change). A pod being deleted, or gone, is left alone.
//   - each ephemeral volume, in the pod's order: if the cache holds a claim
//     of its name that the pod controls, nothing; one the pod does not
//     control is an error (". . . was not created for pod . . . (pod is not
//     owner)"); otherwise a claim is created with the template's labels,
//     annotations and spec, and one owner reference to the pod (v1 Pod,
//     controller, blockOwnerDeletion). The first error is a Warning event
//     FailedBinding on the pod ("ephemeral volume <name>: <error>"), and
//     the pod is retried with exponential back-off without end (an event
//     at every try, which the event recorder aggregates); the later
//     volumes wait for it.
//   - metrics: ephemeral_volume_controller_create_total (creates tried)
//     and ephemeral_volume_controller_create_failures_total, on the
//     host's registry.
//
// Differences from KCM: a deleted claim that reaches the handler as a
// tombstone (a watch gap) queues its pods too (KCM skips it until the pod
// is synced again). The counters' help text is this package's own, and
// they carry no "[ALPHA]" stability prefix. The pods informer caches only
// metadata and the volumes' names, claim names and ephemeral sources (the
// shared index's reads, descriptor.WithReads).
//
// Sharded by namespace: a pod and its claims share one. Under
// --enable-sharding each replica works the pods of its slots with caches
// of those slots only (KCM has no sharding; without the flag it runs on
// the leader as in KCM).
//
// Non-guarantees: the claim is looked up in the cache, so a claim this
// controller has just created but not yet seen makes a create that fails
// with AlreadyExists, retried (and warned about) until the cache has it,
// as in KCM. A claim whose template changes cannot be: pod volumes are
// immutable. Claims are never updated or deleted.
package ephemeral
