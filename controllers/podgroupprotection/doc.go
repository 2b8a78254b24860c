// Package podgroupprotection is kube-controller-manager's
// podgroup-protection controller, native: a deleted PodGroup
// (scheduling.k8s.io/v1beta1) keeps the scheduling.k8s.io/podgroup-protection
// finalizer while an active pod names it, and loses it once none does.
//
// Guarantees, as KCM v1.37 does it:
//   - names: podgroup-protection-controller, no alias; one worker; no flag
//     (KCM has none); its client is KCM's "podgroup-protection-controller"
//     (the ServiceAccount under --use-service-account-credentials, whose
//     RBAC the API server bootstraps when its own GenericWorkload gate is
//     on); the work queue is KCM's "podgroupprotection";
//   - it starts only with the GenericWorkload gate on (beta, off by default
//     in 1.37), read through the host's gate; FeatureSpecs lists it. By
//     default it therefore does not start, as in KCM: the InitFunc logs
//     that the gate is off and starts nothing;
//   - the finalizer is put on PodGroups by the API server's
//     PodGroupProtection admission plugin (on by default, acting under the
//     API server's GenericWorkload gate), not by the controller, as in KCM:
//     a PodGroup without it is left alone;
//   - a PodGroup being deleted with the finalizer loses it (an Update of
//     the cached PodGroup with every copy of it taken out) once no active
//     pod of the cache names it. A pod names a PodGroup with
//     spec.schedulingGroup.podGroupName, in its own namespace; it is active
//     until its phase is Succeeded or Failed (a pending pod, or one being
//     deleted, still holds the PodGroup). The cache is asked through an
//     index of active pods by PodGroup (ActivePodsByPodGroup, "namespace/
//     name"), as KCM's; there is no live list;
//   - what is queued: a PodGroup's add or update when it is being deleted
//     with the finalizer (deletions are not watched); the PodGroup a pod
//     names when the pod is added or updated with a terminal phase, when
//     it is deleted (a tombstone too), and the old pod's when an update
//     replaced it under the same name (another UID). A failed sync is
//     retried with client-go's default controller back-off, without end;
//     the worker starts once both caches have synced. No event is recorded
//     (KCM records none); no metrics of its own.
//
// Differences from KCM: the controller runs only while the API server
// serves scheduling.k8s.io/v1beta1 PodGroups (a beta API, served only
// with --runtime-config). With the gate on and the API not served, KCM's
// controller waits without end for a cache that cannot sync; this one
// waits in phase "unserved", ready, and starts when the API appears (and
// stops if it goes); with the gate off and the API not served it shows as
// "unserved", not as skipped. Running while served, it runs over
// informers of its own (the host's rule for such controllers): its pods
// cache is a second one, not the term's shared pods informer, and keeps of
// each pod only its metadata, spec.schedulingGroup and status.phase (see
// podReads; descriptor.WithReads). A malformed key (never queued) is
// dropped, not retried.
//
// Not sharded: a slot's typed PodGroup informer would hold every slot's
// PodGroups while its pods informer holds the slot's pods only (the host
// filters a listed set of typed informers, PodGroups not among them), so a
// replica would release PodGroups whose pods it does not see.
//
// Non-guarantees: "names" is what the cached pods say: a pod created
// moments before its PodGroup's deletion may not be cached yet when the
// PodGroup is synced, and the PodGroup can then lose its finalizer (KCM
// has the same window; the admission plugin only stamps the finalizer).
// A pod whose phase is not yet terminal but whose containers have all
// exited still holds the PodGroup until the kubelet reports the phase.
package podgroupprotection
