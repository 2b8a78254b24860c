// Package tokencleaner is kube-controller-manager's bootstrap token cleaner
// as a ctrlhost descriptor: canonical name token-cleaner-controller, alias
// tokencleaner, disabled by default (name it in --controllers to run it).
//
// It deletes bootstrap token Secrets (type bootstrap.kubernetes.io/token) in
// Options.TokenSecretNamespace (kube-system) once the RFC 3339 time in their
// data key "expiration" has passed, and requeues a token that has not
// expired yet for the moment it does. A token without an expiration never
// expires.
//
// Guarantees:
//   - Before deleting, the Secret is read again from the API server and its
//     expiry checked on that copy; the delete is preconditioned on that
//     copy's UID and resourceVersion, so a token that was renewed or
//     recreated meanwhile is never deleted (the next event re-evaluates it).
//   - Secrets of other types or namespaces are never touched; informer
//     objects are never modified.
//   - A Secret whose expiration cannot be parsed is logged as an error and,
//     as in KCM (and as the bootstrap token authenticator treats it), handled
//     as expired: it is deleted. It never stops the controller or delays
//     other Secrets.
//
// Non-guarantees and differences from KCM:
//   - KCM deletes straight from its cache with a UID precondition only; the
//     fresh read and resourceVersion precondition are additions.
//   - Expiry is judged by this host's clock; clock skew against the
//     authenticator's host shifts the deletion.
//   - The client's user agent ends in the canonical name rather than KCM's
//     "token-cleaner". No metrics.
package tokencleaner
