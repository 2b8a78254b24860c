// Package term is the host's term engine: it runs one term, a group of
// controllers over one informer set for one leadership period (or for all
// of Run without leader election), from the first InitFunc to the last
// informer released.
//
// A Host carries what every term of one Manager shares (clients, the
// options terms read, metrics, the record of every controller); Host.Run
// runs one term of a Spec. Around that the Manager plans which lock runs
// which controllers, campaigns, and turns the States this package keeps
// into its public ControllerStatus and errors.
//
// Guarantees (the public ones are stated in package manager's doc):
//   - StartFirst controllers are built and their Run called before any
//     other InitFunc; the informers start only after every InitFunc of the
//     term's first build returned (on a warm set each Run starts as soon as
//     its InitFunc returned); InformersStarted closes in every term.
//   - Every Controller an InitFunc returned gets exactly one Run call, a
//     done context if the term stopped first; panics of InitFuncs and of
//     the goroutines that call Run are recovered and fail the term.
//   - A term stops within its StopBudget, cut to a lost lease's StopBy;
//     goroutines still running then are named (ErrShutdownTimeout, wrapping
//     leader.ErrTermStillRunning, so the lease is not released).
//   - A controller stopped alone (SetControllers, a resource no longer
//     served) has its event handlers removed and its informers released
//     once it stopped; keys sent to it meanwhile are held for its next
//     start.
//   - Every write a term's controllers make goes through the term's gate:
//     their clients, their event recorders and their ServiceAccount token
//     requests.
//
// Not guaranteed:
//   - Goroutines a controller starts itself are its own: they are neither
//     recovered nor waited for.
//   - Nothing carries over from one term to the next but the States it is
//     handed: each term makes its informer set anew (or adopts the warm
//     one), and a Host's fields must not change once a term ran.
//
// The package imports nothing of package manager (test/deps keeps it so).
package term
