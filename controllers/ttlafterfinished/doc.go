// Package ttlafterfinished is kube-controller-manager's TTL-after-finished
// controller as a ctrlhost descriptor: canonical name
// ttl-after-finished-controller, alias ttl-after-finished, enabled by "*".
//
// It deletes a Job spec.ttlSecondsAfterFinished seconds after it finished:
// finished means a Complete or Failed condition with status True, and the
// finish time is that condition's lastTransitionTime, as in KCM. A Job that
// is not due yet is requeued for the moment it is.
//
// Guarantees:
//   - Before deleting, the Job is read again from the API server and its TTL
//     re-checked on that copy (the TTL may have been raised, or the Job
//     replaced); the delete uses propagationPolicy Foreground and is
//     preconditioned on that copy's UID and resourceVersion, so a Job changed
//     after the read is re-evaluated, never deleted blindly.
//   - Jobs without a TTL, unfinished Jobs and Jobs already being deleted are
//     never touched; informer objects are never modified.
//   - A finished Job whose condition has no lastTransitionTime is logged as
//     an error and dropped until its next update; it does not delay other
//     Jobs or stop the controller.
//
// Non-guarantees and differences from KCM:
//   - KCM's delete is preconditioned on the UID only, and KCM retries a Job
//     without a lastTransitionTime forever with back-off.
//   - With Foreground propagation the Job stays, with a deletionTimestamp,
//     until the garbage collector has deleted its pods; without a garbage
//     collector it is never removed.
//   - The finish time is not taken from status.completionTime (KCM does not
//     either). A finish time in the future (clock skew) is logged and the
//     deletion deferred.
//   - The client's user agent ends in the canonical name (as in KCM). No
//     metrics (KCM exports job_deletion_duration_seconds).
package ttlafterfinished
