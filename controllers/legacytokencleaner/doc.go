// Package legacytokencleaner is kube-controller-manager's legacy
// ServiceAccount token cleaner, native: Secret-based ServiceAccount tokens
// (type kubernetes.io/service-account-token) that have gone unused for
// --legacy-service-account-token-clean-up-period are labelled invalid,
// which the API server then refuses to authenticate, and deleted once they
// have stayed invalid for as long.
//
// Guarantees, as KCM v1.37 does it:
//   - names: legacy-serviceaccount-token-cleaner-controller, alias
//     legacy-service-account-token-cleaner, enabled by default; flag
//     --legacy-service-account-token-clean-up-period (default 8760h, 365
//     days; it must be positive); its client is KCM's
//     "legacy-service-account-token-cleaner" (the ServiceAccount under
//     --use-service-account-credentials, whose RBAC the API server
//     bootstraps: get the tracking ConfigMap, patch and delete Secrets);
//   - a pass runs once the caches have synced, and again a day after each
//     pass ends; nothing is done between passes (no event triggers one);
//   - each pass first reads (GET, through its client) the API server's
//     kube-system/kube-apiserver-legacy-service-account-token-tracking
//     ConfigMap: without it, without its data key "since", or with a "since"
//     that is not a YYYY-MM-DD date, the pass does nothing (logged). Until
//     a whole period has passed since the midnight (UTC) after that date,
//     the pass does nothing: the API server has not tracked use for long
//     enough to know a token unused;
//   - with the cut-off a period before the pass (its day, UTC, the cut-off
//     day), a token is a candidate when it was created before the cut-off,
//     is not being deleted, has no kubernetes.io/legacy-token-last-used
//     label or one before the cut-off day (a label that is not a date keeps
//     it, logged), its ServiceAccount (annotation
//     kubernetes.io/service-account.name, and .uid when set) exists and
//     lists it among its secrets (otherwise it may not be a generated
//     token), and no pod of its namespace refers to it (image pull secrets,
//     env and envFrom of every container, init and ephemeral ones included,
//     and volume sources: secret, projected, azureFile, cephfs, cinder,
//     flexVolume, rbd, scaleIO, iscsi, storageos, csi), whatever the pod's
//     phase;
//   - a candidate without a kubernetes.io/legacy-token-invalid-since label
//     that is a date gets one, the pass's day, by a merge patch carrying the
//     Secret's UID, and is not deleted in that pass; one labelled invalid
//     since before the cut-off day is deleted, preconditioned on the cached
//     resourceVersion (a token the API server has since marked used is not
//     deleted); a conflict or a token gone is not an error;
//   - a failed patch or delete is logged and the pass goes on; it is tried
//     again at the next pass. Nothing else is written; no event is
//     recorded. Dates are compared as YYYY-MM-DD strings, in UTC.
//
// Differences from KCM:
//   - SyncInterval (KCM hard-codes a day) and the clock are Options, not
//     flags, for hosts and tests; a zero CleanUpPeriod is refused by
//     manager.Builder.Build, where KCM fails to start the controller.
//   - the pods of a namespace are listed once per pass (KCM lists them again
//     for each token of a namespace whose pods refer to no Secret).
//   - it declares what it reads: of a pod, only its Secret references; of a
//     Secret, its type; of a ServiceAccount, its secrets (the host prunes the
//     rest from the caches, when no other controller reads it).
//   - it is sharded by namespace: a token, its ServiceAccount and the pods
//     that may use it share one; under --enable-sharding each replica passes
//     over its slots' namespaces, and each reads the tracking ConfigMap.
//
// Non-guarantees: a pass works from the caches, so a token used or mounted
// since the cache last heard is judged on the cached state (the delete's
// resourceVersion precondition covers a use recorded since; the label
// patch has none, as in KCM); the last-used label is the API server's, kept
// to the day, so the period is effectively rounded to days; a token is
// marked or deleted up to a day after it becomes due; a host restart runs a
// pass at once, as a KCM restart does.
package legacytokencleaner
