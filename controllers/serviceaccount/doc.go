// Package serviceaccount is kube-controller-manager's service account
// controller as a ctrlhost descriptor: canonical name
// serviceaccount-controller, alias serviceaccount, enabled by "*". It is not
// the service-account token controller (serviceaccount-token-controller).
//
// It makes sure that every active namespace has the service accounts of
// Options.ServiceAccounts (KCM: only "default"): a namespace is synced when it
// is added or updated (including informer resyncs), and when one of its
// service accounts is deleted, so a deleted "default" comes back.
//
// Guarantees:
//   - Only namespaces whose phase is Active are acted on; a namespace that
//     is terminating or gone is skipped, and a create refused because the
//     namespace is terminating is not an error.
//   - A service account that exists is never updated or replaced, whatever
//     its content; objects from the informer are never modified.
//   - Failed creates are retried with back-off; other namespaces are not
//     held up.
//
// Non-guarantees and differences from KCM:
//   - KCM has no flag for this controller and runs one worker; so does this
//     package by default (Options.Workers, not a flag).
//   - The client's user agent ends in the canonical name
//     (serviceaccount-controller) rather than KCM's "service-account-controller".
//   - No metrics.
//   - --root-ca-file, which KCM keeps with the service account controllers'
//     options, is registered by package rootcacertpublisher, its only user
//     here; this controller does not read it.
package serviceaccount
