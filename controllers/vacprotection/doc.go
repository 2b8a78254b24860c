// Package vacprotection is kube-controller-manager's
// volumeattributesclass-protection controller, native: every
// VolumeAttributesClass carries the kubernetes.io/vac-protection
// finalizer, and a deleted one keeps it while a PersistentVolume or
// PersistentVolumeClaim names it.
//
// Guarantees, as KCM v1.37 does it:
//   - names: volumeattributesclass-protection-controller, no alias; one
//     worker; no flag (KCM has none); its client is KCM's
//     "volumeattributesclass-protection-controller" (the ServiceAccount
//     under --use-service-account-credentials, whose RBAC the API server
//     bootstraps);
//   - it starts under the VolumeAttributesClass gate (GA and locked on in
//     1.37), read through the host's gate: with the gate off the InitFunc
//     logs that and starts nothing, as KCM leaves the controller out;
//   - "in use" is what the caches hold: a volume whose
//     spec.volumeAttributesClassName names the class, or a claim whose
//     spec.volumeAttributesClassName, status.currentVolumeAttributesClassName
//     or status.modifyVolumeStatus.targetVolumeAttributesClassName does,
//     whatever the phase, deleted or not (a claim or volume being deleted
//     still counts until it is gone);
//   - a class not being deleted without the finalizer gets it; a class
//     being deleted loses it once nothing uses it, and keeps it while
//     anything does; a class being deleted without the finalizer is left
//     alone;
//   - both writes are Updates of the cached class with the finalizer added
//     or removed (a conflict is retried with back-off, without end);
//   - volumes and claims are found by class through indexes of the
//     package's own on the shared informers (declared, for warm standby);
//   - a class is queued when it is added or updated and needs one of the
//     writes; a volume or claim queues the classes an update dropped, and
//     all of its classes when it is deleted (adds queue nothing: a new user
//     cannot free a class); nothing else is written; no event is recorded.
//
// Differences from KCM: a volume or claim whose deletion the informer
// missed (a tombstone) still queues its classes (KCM drops it, and a class
// it was the last user of waits for its next change). The work queue's
// metrics are labelled with the controller's name (KCM's queue is named
// "vacprotection"). A class's own deletion may queue a sync that finds it
// gone and does nothing.
//
// Not sharded: classes are cluster-scoped and their users are claims in
// every namespace; a slot would need every namespace's claims, and the
// class informer is not cut by slot.
//
// Non-guarantees: the caches decide, as in KCM: a claim created with the
// class's name just before the class's deletion reaches the controller may
// be missed, and the class released under it (KCM's documented race).
package vacprotection
