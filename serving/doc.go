// Package serving serves a controller host's endpoints (health, metrics,
// debug) over HTTPS on --secure-port, the way kube-controller-manager serves
// them on 10257: TLS with a given or self-signed certificate, and every
// request authenticated and authorized by delegation to the API server
// (TokenReview, then SubjectAccessReview on the request's non-resource
// path and verb).
//
// New prepares a Server without starting anything; Listen binds the port, so
// a taken port fails before any controller starts; Serve serves until its
// context is done. NewAuthFilter is the authentication and authorization
// filter on its own, for a server of the caller's.
//
// # Guarantees
//
//   - Endpoints are only ever served over TLS (1.2 or later); there is no
//     plain-HTTP fallback.
//   - Paths matching AlwaysAllowPaths (default /healthz, /readyz, /livez and
//     their sub-paths) are served to anyone, without credentials, so probes
//     need no token. A path that is not in clean form (say /healthz/../x)
//     never matches.
//   - Every other request must authenticate (401 otherwise), by the first
//     of: a client certificate of a front proxy that --requestheader-client-ca-file
//     signed (and whose common name --requestheader-allowed-names allows,
//     when set), asserting the user in the --requestheader-*-headers; a
//     client certificate --client-ca-file signed for client use (user: its
//     common name, groups: its organizations); a bearer token a TokenReview
//     accepts. CA files not given are read from the API server's
//     kube-system/extension-apiserver-authentication ConfigMap when the
//     port is bound, unless --authentication-skip-lookup; failing to read
//     it fails Listen unless --authentication-tolerate-lookup-failure.
//   - The front-proxy headers are removed from every request before the
//     handler sees it, whoever sent them.
//   - It must then be authorized: a SubjectAccessReview that allows the user the
//     lower-cased HTTP method on the path (403 otherwise), unless
//     authentication and authorization were explicitly disabled.
//   - Fail closed: a TokenReview that cannot be made or reports an error
//     answers 401; a SubjectAccessReview that cannot be made answers 403.
//     Such failures are logged, at most once per kind per interval.
//   - The Authorization header is removed before a request reaches the
//     wrapped handler, which finds the caller with UserFrom.
//   - Serve returns only after its goroutines have ended and the server has
//     shut down, gracefully within ShutdownTimeout, forcibly after it.
//
// # Non-guarantees
//
//   - Decisions are cached (TokenCacheTTL, AuthorizedCacheTTL,
//     UnauthorizedCacheTTL; 10s each by default), so a revoked token or a
//     removed RBAC binding may keep working for up to that long, and a new
//     binding may take that long to be honoured.
//   - The self-signed certificate is generated in memory once, at New, is
//     valid for a year and is never rotated; certificate files are read once
//     too (no reload on change). Use files for anything that lives long.
//   - A handler that ignores its request's context may still be running
//     after Serve returned, once the shutdown bound forced connections shut.
//   - Anonymous requests are not supported. CA files and the looked-up
//     ConfigMap are read once: a rotated CA needs a restart (KCM reloads
//     them).
//   - TLS 1.0 and 1.1 are refused even when --tls-min-version asks for them.
package serving
