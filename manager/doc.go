// Package manager hosts Kubernetes controllers the way kube-controller-manager
// does: it selects descriptors with --controllers, builds them over one
// shared informer set per leadership term, runs them under leader election
// (and leader migration), serves their health, metrics and debug endpoints,
// and stops them within a bound.
//
// Build a Manager with NewBuilder(component).Register(...).Build(); Build
// checks every input and reports all problems in one error. Run blocks until
// its context is done, the lease is lost (under the exit policy), or a
// controller fails, and returns why.
//
// Guarantees:
//   - Within a term, StartFirst controllers are built and running before any
//     other InitFunc is called; the informers start only after every InitFunc
//     returned; InformersStarted closes after they started; then every other
//     controller's Run starts in its own goroutine. Every Controller an
//     InitFunc returned gets exactly one Run call.
//   - A panic in an InitFunc or a Run is recovered, logged with the
//     controller's name, fails its health check, ends the term and is
//     returned from Run (wrapping ErrControllerFailed). The package never
//     exits the process.
//   - A term waits at most ControllerShutdownTimeout for its controllers
//     (when the lease was lost: at most the lock's stop budget, so that they
//     stop before another replica could take the lease) and names those that
//     did not return (ErrShutdownTimeout). Such a term ends Run instead of
//     campaigning again. The term's informers are shut down after it.
//   - With leader election the lease is released only after the term's
//     controllers returned; losing it is an error from Run (leader.ErrLeaseLost)
//     or, under the recampaign policy, a fresh campaign after the term fully
//     stopped.
//   - Run owns every goroutine it starts and returns after they ended, except
//     controllers that ignored cancellation past the timeout, which it names.
//
// Non-guarantees:
//   - Leader election is not fencing: a replica paused past its lease can
//     still act until it notices (see package leader).
//   - A controller that ignores its context keeps running after Run returned.
//   - The health gauges in /metrics reflect the last probe of the health
//     endpoints.
//   - klog is process-global; the Manager never reroutes it. Programs call
//     logging.RouteKlog(m.Logger()) before starting anything.
package manager
