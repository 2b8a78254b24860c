// Package pcrcleaner is kube-controller-manager's
// podcertificaterequest-cleaner controller, native: it deletes every
// PodCertificateRequest fifteen minutes after its creation, whatever its
// state (a request's flow is expected to be over by then).
//
// Guarantees, as KCM v1.37 does it:
//   - names: podcertificaterequest-cleaner-controller, no alias; its
//     client is KCM's "podcertificaterequestcleaner" (the ServiceAccount
//     under --use-service-account-credentials, whose RBAC the API server
//     bootstraps while its PodCertificateRequest gate is on); no flag (KCM
//     has none: the age, 15 minutes, and the period, 5 minutes, are
//     fixed);
//   - it does not start when the PodCertificateRequest feature gate is off
//     (GA and on by default in 1.37; read through the host's gate when the
//     host registers FeatureSpecs, else its default);
//   - passes over the cached requests of every namespace, one at once and
//     each next one Period after the last ended; a request whose
//     creationTimestamp is MaxAge ago or earlier is deleted with its UID
//     as a precondition (a request re-created under the same name is not
//     deleted for its predecessor's age); one already gone is skipped,
//     and a deletion that fails is logged and left to the next pass;
//   - nothing else is written; no event is recorded.
//
// Differences from KCM: KCM's first pass runs as soon as the controller
// does, without waiting for its cache, so it usually sees nothing, and
// the first requests are deleted at the next pass, five minutes later;
// this controller's first pass waits for the cache, and deletes what is
// due at once. (The differential scenario delays KCM's first pass until
// its cache has synced, to compare what each decides.)
//
// Not sharded: a pass lists every request, and the typed informer of
// PodCertificateRequests is not one the host filters to a shard's slots,
// so every replica would delete every request.
//
// Non-guarantees: a request is deleted up to Period after it is due; the
// age is measured by the host's clock against the API server's
// creationTimestamp, so clock skew moves it, as in KCM.
package pcrcleaner
