// Package csrcleaner is kube-controller-manager's
// certificatesigningrequest-cleaner controller, native: it deletes the
// certificate requests that are past their time, in hourly passes, so
// that automatically created and approved requests do not pile up.
//
// Guarantees, as KCM v1.37 does it:
//   - names: certificatesigningrequest-cleaner-controller, alias
//     csrcleaner; enabled by "*"; no flag (KCM has none); its client is
//     KCM's "certificate-controller" (the ServiceAccount under
//     --use-service-account-credentials, whose RBAC the API server
//     bootstraps);
//   - a pass looks at every cached request and deletes, by KCM's rules in
//     KCM's order: an issued request (one with a certificate) with an
//     Approved condition updated more than an hour ago; a request with a
//     Denied or a Failed condition updated more than an hour ago; a
//     request without any condition created more than a day ago; an
//     issued, approved request whose certificate (the first of its PEM
//     bundle) has ended; an approved request without a certificate whose
//     Approved condition was updated more than a day ago. A condition
//     without a lastUpdateTime never ages; a certificate that does not
//     parse never ends; each deletion is logged with its reason;
//   - a deletion that fails is logged and left to the next pass, which
//     comes an hour after this one ends.
//
// Differences from KCM: the first pass waits for the cache to sync. KCM's
// first pass runs as soon as the controller starts, over whatever its
// informer has listed by then, which after a start is usually nothing (the
// differential scenario saw upstream delete nothing in every unsynced
// run), so KCM cleans up an hour after starting; this controller cleans up
// at start. Deletions carry a UID precondition, so a request deleted and
// recreated under the same name since the cache saw it is not deleted.
// Not sharded: requests are cluster-scoped and few, and a pass over all of
// them an hour is cheap.
//
// Non-guarantees: ages are judged by this host's clock against times the
// API server (or the client that set them) recorded. Nothing is deleted
// between passes: a request becomes due up to an hour before a pass sees
// it. Requests are read from the cache, so one deleted and recreated just
// before a pass may be judged by its older state (the UID precondition
// then keeps the new one).
package csrcleaner
