package poll

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTB records Fatalf instead of ending the test; the methods poll does
// not call are left nil (they panic).
type fakeTB struct {
	testing.TB
	failed []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = append(f.failed, fmt.Sprintf(format, args...))
}

// afterCalls returns a condition that holds from its nth call on (never if
// n is 0), and the count of its calls.
func afterCalls(n int) (func() bool, *int) {
	calls := new(int)
	return func() bool { *calls++; return n > 0 && *calls >= n }, calls
}

// short is the deadline of the conditions that never hold: the wait for
// it is the wait under test, not a sleep.
const short = 30 * time.Millisecond

func TestUntil(t *testing.T) {
	tests := []struct {
		name      string
		p         Poller
		n         int // cond holds from its nth call; 0: never
		wantCalls int // 0: any number
		wantFail  string
	}{
		{name: "holds at once, checked once", p: Within(Timeout), n: 1, wantCalls: 1},
		{name: "holds at once with no time left", p: Within(0), n: 1, wantCalls: 1},
		{name: "holds at the third check", p: Within(Timeout), n: 3, wantCalls: 3},
		{name: "never holds", p: Within(short),
			wantFail: "timed out after 30ms waiting for the thing"},
		{name: "no time left: one check, then the failure", p: Within(0), wantCalls: 1,
			wantFail: "timed out after 0s waiting for the thing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cond, calls := afterCalls(tt.n)
			tb := &fakeTB{}
			start := time.Now()
			tt.p.Until(tb, "the thing", cond)
			checkFailures(t, tb, tt.wantFail)
			if tt.wantCalls != 0 && *calls != tt.wantCalls {
				t.Errorf("%d checks, want %d", *calls, tt.wantCalls)
			}
			if tt.wantFail != "" && time.Since(start) < tt.p.timeout {
				t.Errorf("failed after %v, before its timeout %v", time.Since(start), tt.p.timeout)
			}
		})
	}
}

func TestUntilContext(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name     string
		results  []error // the checks' errors in turn, the last repeated
		holdAt   int     // the check that returns true; 0: none
		wantFail string
	}{
		{name: "holds at once", results: []error{nil}, holdAt: 1},
		{name: "an error does not end the wait", results: []error{boom, boom, nil}, holdAt: 3},
		{name: "never holds, no error", results: []error{nil},
			wantFail: "timed out after 30ms waiting for the thing"},
		{name: "never holds: the last error is reported",
			results:  []error{errors.New("first"), boom},
			wantFail: "timed out after 30ms waiting for the thing: boom"},
		{name: "an error is remembered past checks without one",
			results:  []error{boom, nil},
			wantFail: "timed out after 30ms waiting for the thing: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			tb := &fakeTB{}
			Within(short).UntilContext(tb, "the thing", func(ctx context.Context) (bool, error) {
				calls++
				if _, ok := ctx.Deadline(); !ok {
					t.Error("the condition's context has no deadline")
				}
				err := tt.results[min(calls, len(tt.results))-1]
				return calls == tt.holdAt, err
			})
			checkFailures(t, tb, tt.wantFail)
			if tt.holdAt != 0 && calls != tt.holdAt {
				t.Errorf("%d checks, want %d", calls, tt.holdAt)
			}
		})
	}
}

// TestUntilContextKeepsTheErrorBeforeTheDeadline: a check cut short by the
// deadline reports the context's error only if there was none before.
func TestUntilContextKeepsTheErrorBeforeTheDeadline(t *testing.T) {
	tests := []struct {
		name     string
		first    error
		wantFail string
	}{
		{"an earlier error", errors.New("forbidden"),
			"timed out after 30ms waiting for the thing: forbidden"},
		{"none earlier", nil,
			"timed out after 30ms waiting for the thing: context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := &fakeTB{}
			calls := 0
			Within(short).UntilContext(tb, "the thing", func(ctx context.Context) (bool, error) {
				calls++
				if calls == 1 {
					return false, tt.first
				}
				<-ctx.Done() // a call that blocks until the deadline
				return false, ctx.Err()
			})
			checkFailures(t, tb, tt.wantFail)
		})
	}
}

func TestFor(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		n       int // cond holds from its nth call; 0: never
		want    bool
	}{
		{"holds at once", Timeout, 1, true},
		{"holds at the second check", Timeout, 2, true},
		{"never holds", short, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cond, calls := afterCalls(tt.n)
			if got := For(tt.timeout, cond); got != tt.want {
				t.Errorf("For = %v, want %v", got, tt.want)
			}
			if tt.want && *calls != tt.n {
				t.Errorf("%d checks, want %d", *calls, tt.n)
			}
		})
	}
}

// TestUntilUsesTimeout: the package's functions wait Timeout; a condition
// that holds returns at once.
func TestUntilUsesTimeout(t *testing.T) {
	tb := &fakeTB{}
	Until(tb, "the thing", func() bool { return true })
	UntilContext(tb, "the thing", func(ctx context.Context) (bool, error) {
		d, ok := ctx.Deadline()
		if !ok || time.Until(d) > Timeout || time.Until(d) < Timeout-10*time.Second {
			t.Errorf("the context's deadline is %v away, want Timeout (%v)", time.Until(d), Timeout)
		}
		return true, nil
	})
	checkFailures(t, tb, "")
}

// TestInACleanup: t's context has ended when a cleanup runs; the wait
// goes on regardless.
func TestInACleanup(t *testing.T) {
	var calls *int
	t.Run("test", func(t *testing.T) {
		t.Cleanup(func() {
			var cond func() bool
			cond, calls = afterCalls(3)
			Until(t, "the thing", cond)
		})
	})
	switch {
	case calls == nil:
		t.Error("the cleanup did not wait")
	case *calls != 3:
		t.Errorf("%d checks in the cleanup, want 3", *calls)
	}
}

// TestInABubble: inside a synctest bubble the wait runs on the bubble's
// clock, so an hour's timeout passes at once.
func TestInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := &fakeTB{}
		start := time.Now()
		Within(time.Hour).Until(tb, "the thing", func() bool { return false })
		checkFailures(t, tb, "timed out after 1h0m0s waiting for the thing")
		if took := time.Since(start); took < time.Hour {
			t.Errorf("failed after %v of the bubble's time, before its timeout", took)
		}
	})
}

// TestLastCheckAtTheDeadline: a condition that holds only from the
// deadline on, between two ticks, does not time out.
func TestLastCheckAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = Interval*100 + Interval/2
		tb := &fakeTB{}
		start := time.Now()
		Within(timeout).Until(tb, "the thing", func() bool { return time.Since(start) >= timeout })
		checkFailures(t, tb, "")
		if took := time.Since(start); took != timeout {
			t.Errorf("held after %v, want at the deadline (%v)", took, timeout)
		}
	})
}

func checkFailures(t *testing.T, tb *fakeTB, want string) {
	t.Helper()
	switch {
	case want == "" && len(tb.failed) != 0:
		t.Errorf("failed: %q", tb.failed)
	case want != "" && (len(tb.failed) != 1 || tb.failed[0] != want):
		t.Errorf("failures %q, want [%q]", tb.failed, want)
	}
}
