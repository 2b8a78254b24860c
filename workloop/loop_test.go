package workloop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/ctrlhost/ctrlhost/internal/poll"
)

// fastRetry keeps retries quick so tests finish in milliseconds.
func fastRetry() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](
		time.Millisecond,
		10*time.Millisecond,
	)
}

// recorder counts syncs per key and lets a test wait for a count.
type recorder struct {
	mu    sync.Mutex
	calls map[string]int
}

func (r *recorder) inc(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	r.calls[key]++
	return r.calls[key]
}

func (r *recorder) get(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[key]
}

// runLoop runs l in the background and returns a stop func that cancels
// it and returns Run's error.
func runLoop(t *testing.T, l *Loop) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after cancel")
			return nil
		}
	}
}

func TestPanicIsRecoveredCountedAndRetried(t *testing.T) {
	var r recorder
	name := "panic-test"
	before := counterValue(t, processCounters.panics, name)
	l := New(name, func(_ context.Context, key string) error {
		if r.inc(key) == 1 {
			panic("boom")
		}
		return nil
	}, Options{RateLimiter: fastRetry()})
	l.Add("ns/a")
	stop := runLoop(t, l)
	poll.Until(t, "the retry after the panic", func() bool { return r.get("ns/a") == 2 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := counterValue(t, processCounters.panics, name) - before; got != 1 {
		t.Errorf("panics counted = %v, want 1", got)
	}
}

func TestSyncErrors(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		maxRetries int
		wantCalls  int
	}{
		{name: "nil syncs once", err: nil, wantCalls: 1},
		{name: "permanent is dropped", err: Permanent(errors.New("bad spec")), wantCalls: 1},
		{
			name:       "transient retries up to MaxRetries",
			err:        errors.New("conflict"),
			maxRetries: 3,
			wantCalls:  4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recorder
			l := New("errors-test", func(_ context.Context, key string) error {
				r.inc(key)
				return tt.err
			}, Options{MaxRetries: tt.maxRetries, RateLimiter: fastRetry()})
			l.Add("k")
			stop := runLoop(t, l)
			poll.Until(t, "the key to be dropped",
				func() bool { return r.get("k") >= tt.wantCalls && l.Len() == 0 })
			// A dropped key stays dropped: add a sentinel and wait for it,
			// which proves the worker moved on.
			l.Add("sentinel")
			poll.Until(t, "the sentinel", func() bool { return r.get("sentinel") > 0 })
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := r.get("k"); got != tt.wantCalls {
				t.Errorf("syncs of k = %d, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestRequeueAfterIsNotAFailure(t *testing.T) {
	var r recorder
	l := New("requeue-test", func(_ context.Context, key string) error {
		if r.inc(key) == 1 {
			return RequeueAfter(time.Millisecond)
		}
		return nil
	}, Options{MaxRetries: 1, RateLimiter: fastRetry()})
	l.Add("k")
	stop := runLoop(t, l)
	poll.Until(t, "the requeued sync", func() bool { return r.get("k") == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestRunBeforeSyncStartsNoWorker(t *testing.T) {
	var r recorder
	l := New(
		"unsynced",
		func(_ context.Context, key string) error { r.inc(key); return nil },
		Options{},
	)
	l.WaitFor(func() bool { return false })
	l.Add("k")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Run(ctx); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if r.get("k") != 0 {
		t.Error("a worker synced a key before the caches synced")
	}
	if !l.queue.ShuttingDown() {
		t.Error("queue not shut down")
	}
}

func TestRunRejectsNoWorkers(t *testing.T) {
	l := New("bad", func(context.Context, string) error { return nil }, Options{Workers: -1})
	if err := l.Run(t.Context()); err == nil {
		t.Fatal("Run with Workers=-1 returned nil")
	}
	if !l.queue.ShuttingDown() {
		t.Error("queue not shut down")
	}
}
