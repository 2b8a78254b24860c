// Package pvprotection is kube-controller-manager's
// persistentvolume-protection controller, native: every PersistentVolume
// carries the kubernetes.io/pv-protection finalizer, and a deleted one
// keeps it while it is bound to a claim.
//
// Guarantees, as KCM v1.37 does it:
//   - names: persistentvolume-protection-controller, alias pv-protection;
//     one worker; no flag (KCM has none); its client is KCM's
//     "pv-protection-controller" (the ServiceAccount under
//     --use-service-account-credentials, whose RBAC the API server
//     bootstraps);
//   - a volume not being deleted without the finalizer gets it; a volume
//     being deleted loses it once its phase is not Bound, and keeps it
//     while it is;
//   - both writes are Updates of the cached volume with the finalizer added
//     or removed (a conflict is retried with back-off);
//   - adds and updates are watched; a volume that needs neither write is
//     not queued; nothing else is written; no event is recorded.
//
// A sync that fails is retried with back-off without end, as in KCM (the
// kit's MaxRetries is 0). Not sharded: volumes are cluster-scoped (sharding by UID would
// split them, but one worker already keeps up with a cluster's volumes).
//
// Non-guarantees: "in use" is the volume's phase only, as in KCM: a volume
// whose claim is gone but whose phase still says Bound keeps the finalizer
// until the persistent-volume binder moves it on.
package pvprotection
