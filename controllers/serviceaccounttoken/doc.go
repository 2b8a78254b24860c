// Package serviceaccounttoken is kube-controller-manager's service-account
// token controller as a ctrlhost descriptor: canonical name
// serviceaccount-token-controller, alias serviceaccount-token, enabled by
// "*", and, as in KCM, started before every other controller (StartFirst).
//
// It keeps legacy token secrets (type kubernetes.io/service-account-token)
// in step with their ServiceAccounts, as KCM does:
//   - a token secret whose ServiceAccount (named by the
//     kubernetes.io/service-account.name annotation, and matching the
//     kubernetes.io/service-account.uid annotation when that is set) exists
//     gets the data it lacks: "token", a JWT signed with
//     --service-account-private-key-file (RS256 for an RSA key; ES256,
//     ES384 or ES512 for an ECDSA key on P-256, P-384 or P-521), carrying
//     the API server's key id of the public key, issuer
//     "kubernetes/serviceaccount", subject
//     system:serviceaccount:<namespace>:<name> and the
//     kubernetes.io/serviceaccount/{namespace,secret.name,
//     service-account.name,service-account.uid} claims; "ca.crt", the root
//     CA (--root-ca-file, else the CA data of the controller's client
//     configuration), rewritten when it differs; "namespace". Both
//     annotations are then set, so a missing uid annotation is filled;
//   - a token secret whose ServiceAccount does not exist, or has another
//     uid, is deleted (preconditioned on the secret's uid);
//   - when a ServiceAccount goes, its token secrets are deleted;
//   - when a token secret goes, it is removed from its ServiceAccount's
//     secrets list.
//
// Without --service-account-private-key-file the InitFunc logs that the
// controller is disabled and returns (nil, nil), as KCM does.
//
// The controller acts with the host's own credentials (RootClientBuilder),
// as KCM's does: it mints the tokens other controllers' credentials may
// need.
//
// Guarantees:
//   - Informer objects are never modified: a secret is filled on a fresh
//     copy read from the API server, and only when that copy is the one the
//     cache holds (otherwise its update event brings it back), with an
//     optimistic-concurrency update. A token is never replaced, only added
//     when missing.
//   - Retriable failures (API errors other than NotFound and Conflict) are
//     retried with back-off up to Options.MaxRetries times (10, KCM's);
//     others are logged and the key dropped until the next event.
//   - The key file and the CA file are checked when manager.Builder.Build
//     validates the options (each error names its flag), and read again on
//     each term.
//
// Non-guarantees (as in KCM):
//   - A token already present is never checked or re-signed: a changed
//     signing key, or a token edited by hand, stays until the "token" data
//     is emptied.
//   - Tokens are not bound to a lifetime; the legacy token cleaner, not
//     this controller, retires unused ones.
//
// Differences from KCM:
//   - A token secret deleted while the informer was disconnected (a
//     tombstone) is still removed from its ServiceAccount's secrets; KCM
//     drops tombstones of secrets.
//   - The two work queues are named serviceaccount_tokens_service and
//     serviceaccount_tokens_secret (KCM 1.37 gives both the first name);
//     each loop waits for its event handlers' initial events, not only the
//     informers' sync.
//   - Over a host without a REST configuration (ready-made clients) and
//     without --root-ca-file, no ca.crt is written (KCM fails to start).
//   - No metrics beyond the work queues' and the kit's.
package serviceaccounttoken
