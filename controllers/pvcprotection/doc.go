// Package pvcprotection is kube-controller-manager's
// persistentvolumeclaim-protection controller, native: every
// PersistentVolumeClaim carries the kubernetes.io/pvc-protection
// finalizer, and a deleted one keeps it while a pod uses it. With the
// PersistentVolumeClaimUnusedSinceTime gate (beta, on by default in 1.37)
// it also keeps the Unused condition of bound claims.
//
// Guarantees, as KCM v1.37 does it:
//   - names: persistentvolumeclaim-protection-controller, alias
//     pvc-protection; one worker; no flag (KCM has none); its client is
//     KCM's "pvc-protection-controller" (the ServiceAccount under
//     --use-service-account-credentials, whose RBAC the API server
//     bootstraps); FeatureSpecs lists the gate.
//   - a claim not being deleted without the finalizer gets it (an Update
//     of the cached claim with it appended);
//   - a claim being deleted loses it (an Update with it taken out) once no
//     pod uses it. A pod uses it when the pod is scheduled (spec.nodeName
//     set: the kubelet will not start a pod whose claim is being deleted)
//     and either names it in a persistentVolumeClaim volume, whatever the
//     pod's phase, or has a generic ephemeral volume whose claim
//     ("<pod>-<volume>") it is and controls, unless the pod is deleted
//     with a zero grace period (force-deleted, or released by the
//     kubelet), which breaks a pod-finalizer/claim cycle as KCM does;
//   - "no pod uses it" is asked of the informer's pods first (through the
//     shared index of pods by claim, controllers/internal/index) and, when
//     they have none, of a live, unpaginated LIST of the namespace's pods:
//     a pod just created may not be cached yet. The claims waiting in one
//     namespace are synced together and share one such list, made at most
//     once per batch, as KCM's lazy live list is;
//   - with the gate, a bound claim not being deleted gets Unused=False
//     (reason PodUsingPVC) when a pod that has not terminated (failed,
//     succeeded, or deleted with no container running) names it, scheduled
//     or not, and the condition is missing or True; Unused=True (reason
//     NoPodsUsingPVC) when no such pod does and it is missing or not True.
//     The live list applies here too. The condition is written with an
//     UpdateStatus, its lastTransitionTime the time of the write;
//   - what is queued: a claim's add or update when it lacks the
//     finalizer, is being deleted with it, or (with the gate) has no
//     Unused condition; the claims a pod names on its add, update or
//     deletion (without the gate: only a pod deleted, terminated or
//     unscheduled), and those of a pod replaced under the same name as if
//     it was deleted. Claim deletions are not watched. A failed claim is
//     retried with its own exponential back-off (client-go's default
//     controller rate limiter), or at once on its next event. No event is
//     recorded; no metrics of its own.
//
// Differences from KCM: when one sync both writes the Unused condition
// and adds the finalizer, the Update is made of the claim the status write
// returned (KCM updates the stale cached claim, fails on the conflict and
// adds the finalizer on its retry): one write fewer, the same end state.
// The claims of a batch are synced in name order (KCM: queue order). The
// pods informer caches only what the controller and the index read (see
// podReads; descriptor.WithReads); the live list is of whole pods.
//
// Sharded by namespace: a claim and the pods that use it share one, and
// the live list is of one namespace. Under --enable-sharding each replica
// works the claims of its slots with caches of those slots only (KCM has
// no sharding; without the flag it runs on the leader as in KCM).
//
// Non-guarantees: "uses" is what the pod objects say; an unscheduled pod
// never holds back a deletion, and a claim whose last user is deleted with
// a grace period keeps the finalizer until that pod is gone (its next
// event queues the claim). The live list is one full LIST of the
// namespace's pods per batch that needs it: a namespace with many pods and
// many claims being deleted costs that, as in KCM.
package pvcprotection
