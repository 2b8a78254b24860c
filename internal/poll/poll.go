// Package poll is how the module's tests wait for a condition: it checks
// the condition until it holds, and fails the test, naming what it waited
// for, once a deadline has passed.
//
// Guarantees:
//   - the condition is checked at once, then every Interval, and a last
//     time once the deadline has passed, so a condition that holds at the
//     deadline does not time out; it is not checked again once it held;
//   - it is called on the calling goroutine, one call at a time: it may
//     call t.Fatal, and read what only the test's goroutine writes;
//   - every wait has a deadline, Timeout or the one given to Within or
//     For. Past it, Until and UntilContext fail the test with
//     t.Fatalf("timed out after <timeout> waiting for <what>"), to which
//     UntilContext adds the last error its condition returned; For
//     returns false;
//   - poll starts no goroutine: it leaves none behind, and it runs in a
//     testing/synctest bubble, on the bubble's clock;
//   - a wait does not end with t's context, so it may run in a function
//     registered with t.Cleanup, when that context has already ended.
//
// Non-guarantees: the deadline is looked at between two checks, so a
// condition that blocks holds the wait past it (UntilContext's context
// ends at the deadline, for conditions that can honour one; it has ended
// at the last check); checks are not exactly Interval apart (a slow check
// delays the next, and missed ticks are not made up); a condition that
// holds only between two checks may be missed.
package poll

import (
	"context"
	"testing"
	"time"
)

const (
	// Timeout bounds a wait of Until and UntilContext.
	Timeout = 30 * time.Second
	// Interval is the time between two checks of a condition.
	Interval = 10 * time.Millisecond
)

// Until checks cond until it returns true and fails t after Timeout; what
// names the awaited condition in the failure.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(Timeout).Until(t, what, cond)
}

// UntilContext checks cond until it returns true (whatever its error) and
// fails t after Timeout. cond's context ends at the deadline. An error
// from cond does not end the wait: the last one is reported with the
// timeout (to end the wait at once, cond can call t.Fatal).
func UntilContext(t testing.TB, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	Within(Timeout).UntilContext(t, what, cond)
}

// For checks cond until it returns true, or until timeout has passed, and
// reports whether cond held. It is for a goroutine other than the test's,
// where t.Fatal must not be called, and for a caller that reports a
// timeout its own way.
func For(timeout time.Duration, cond func() bool) bool {
	return run(timeout, func(context.Context) bool { return cond() })
}

// Poller waits with a deadline of its own.
type Poller struct{ timeout time.Duration }

// Within returns a Poller whose waits fail after timeout instead of
// Timeout: for a wait that has its own bound.
func Within(timeout time.Duration) Poller { return Poller{timeout: timeout} }

// Until is the package's Until, with p's timeout.
func (p Poller) Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !For(p.timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", p.timeout, what)
	}
}

// UntilContext is the package's UntilContext, with p's timeout.
func (p Poller) UntilContext(t testing.TB, what string,
	cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	held := run(p.timeout, func(ctx context.Context) bool {
		ok, err := cond(ctx)
		// An error caused by the deadline (a call cut short) does not
		// hide the one seen before it.
		if err != nil && (last == nil || ctx.Err() == nil) {
			last = err
		}
		return ok
	})
	switch {
	case held:
	case last != nil:
		t.Fatalf("timed out after %s waiting for %s: %v", p.timeout, what, last)
	default:
		t.Fatalf("timed out after %s waiting for %s", p.timeout, what)
	}
}

// run checks cond, passing it a context that ends at the deadline, at once,
// then every Interval and once the deadline has passed, until it returns
// true (true) or a check after the deadline did not (false).
func run(timeout time.Duration, cond func(ctx context.Context) bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		if cond(ctx) {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}
