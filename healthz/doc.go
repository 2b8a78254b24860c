// Package healthz serves the health endpoints of a controller host:
// /healthz, /livez and /readyz, each an ordered list of named checks.
//
// Checks are collected in a [Registry] and frozen into a [Handler] by
// [Registry.Handler], which validates every registration and reports all
// problems at once. The output format follows the Kubernetes apiserver, so
// probes, scripts and humans used to kube-controller-manager see the same text.
//
// # Guarantees
//
//   - A Handler is immutable once built: later calls to [Registry.Add] do not
//     change it. It is safe for concurrent use.
//   - GET /<endpoint> runs every check of that endpoint, in registration
//     order, sequentially, passing the incoming request (and so its context)
//     to each [Checker]. It answers 200 with the body "ok" when all pass, and
//     500 otherwise with one line per check ("[+]name ok",
//     "[+]name excluded: ok", "[-]name failed: reason withheld") followed by
//     "<endpoint> check failed".
//   - The query parameter verbose (present with any value) makes a passing
//     response list every check followed by "<endpoint> check passed", and
//     makes failing lines carry the error ("[-]name failed: <err>"). Without
//     it, failure detail is withheld.
//   - exclude=<name> (repeatable) skips that check; it is listed as excluded.
//     Names that match no check produce a line
//     `warn: some health checks cannot be excluded: no matches for "x"`
//     and do not fail the request.
//   - GET /<endpoint>/<name> runs that one check: 200 "ok", or 500
//     "internal server error: <err>"; an unknown name is a 404.
//   - An endpoint with no registered checks serves a single check named
//     "ping" that always passes ([Ping]), as the apiserver does.
//   - A panicking Checker is recovered and reported as that check's failure
//     ("panic: <value>"); the handler keeps serving.
//   - Only GET and HEAD are served (405 with an Allow header otherwise). Every
//     response is text/plain; charset=utf-8, with
//     X-Content-Type-Options: nosniff and Cache-Control: no-store.
//
// # Non-guarantees
//
//   - No caching: every request runs its checks anew, so a slow Checker makes
//     a slow probe. Checkers should be cheap and honour the request context.
//   - No timeouts beyond the request context: bound it with your server's
//     settings or an http.TimeoutHandler.
//   - No authentication or authorization: verbose output can reveal internal
//     errors, so put the Handler behind your own filter if it is reachable
//     by untrusted clients.
//   - No logging or metrics: wrap the Handler, or call [Handler.Check], to
//     record them.
//   - Paths are matched on r.URL.Path exactly; mount the Handler at the root
//     of a mux (or behind http.StripPrefix).
package healthz
