package workloop_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

var _ descriptor.Controller = (*workloop.Loop[string])(nil)

const deadline = 30 * time.Second // only a broken implementation gets near it

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	limit := time.Now().Add(deadline)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(limit) {
			t.Fatalf("timed out waiting until %s", what)
		}
		<-tick.C
	}
}

// run runs l in the background until the test ends; the returned func stops
// it and waits, with a deadline, for Run to return.
func run(t *testing.T, l *workloop.Loop[string]) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), testr.New(t)))
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(deadline):
				t.Errorf("Run did not return within %v of cancel", deadline)
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// A panic in a sync is recovered and counted, the worker lives on, and the
// key is retried: the process never crashes.
func TestPanicInSyncIsRecoveredCountedAndRetried(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := workloop.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	l := workloop.New("panicky-controller", func(_ context.Context, key string) error {
		if calls.Add(1) == 1 {
			panic("bug in sync of " + key)
		}
		return nil
	}, workloop.Options{})
	before := testutil.ToFloat64(panicsOf("panicky-controller"))
	l.Add("ns/a")
	stop := run(t, l)
	eventually(t, "the key is retried after the panic", func() bool { return calls.Load() == 2 })
	if got := testutil.ToFloat64(panicsOf("panicky-controller")) - before; got != 1 {
		t.Errorf("panics counted: %v, want 1", got)
	}
	l.Add("ns/b") // the worker survived
	eventually(t, "the worker syncs another key", func() bool { return calls.Load() == 3 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg, "workloop_sync_panics_total")
	if err != nil || n == 0 {
		t.Errorf("workloop_sync_panics_total not in the registry: %d, %v", n, err)
	}
}

// panicsOf reads the process-wide panic counter of one loop.
func panicsOf(name string) prometheus.Collector {
	return workloop.PanicsCounter(name)
}

func TestErrorsDecideTheKeysFate(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		err       func(call int32) error
		maxRetry  int
		wantCalls int32
	}{
		{"nil forgets", func(int32) error { return nil }, 0, 1},
		{"transient error retries until it succeeds", func(c int32) error {
			if c < 3 {
				return boom
			}
			return nil
		}, 0, 3},
		{"permanent error drops", func(int32) error { return workloop.Permanent(boom) }, 0, 1},
		{"max retries drops", func(int32) error { return boom }, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			l := workloop.New("errors-"+strings.ReplaceAll(tc.name, " ", "-"), func(context.Context, string) error {
				return tc.err(calls.Add(1))
			}, workloop.Options{MaxRetries: tc.maxRetry})
			l.Add("k")
			stop := run(t, l)
			eventually(t, "the expected calls", func() bool { return calls.Load() >= tc.wantCalls })
			// The key is settled: no further call arrives while the queue is empty.
			eventually(t, "the queue to drain", func() bool { return l.Len() == 0 })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if got := calls.Load(); got != tc.wantCalls {
				t.Errorf("calls = %d, want %d", got, tc.wantCalls)
			}
		})
	}
}

func TestRequeueAfterUsesTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	var calls atomic.Int32
	l := workloop.New("requeue-after", func(context.Context, string) error {
		if calls.Add(1) == 1 {
			return workloop.RequeueAfter(time.Hour)
		}
		return nil
	}, workloop.Options{Clock: clk})
	l.Add("k")
	run(t, l)
	eventually(t, "the first sync", func() bool { return calls.Load() == 1 })
	eventually(t, "the delayed add to wait on the clock", clk.HasWaiters)
	if calls.Load() != 1 {
		t.Fatal("synced again before the hour passed")
	}
	clk.Step(time.Hour)
	eventually(t, "the sync an hour later", func() bool { return calls.Load() == 2 })
}

func TestPermanentNil(t *testing.T) {
	if workloop.Permanent(nil) != nil || workloop.IsPermanent(errors.New("x")) || !workloop.IsPermanent(workloop.Permanent(errors.New("x"))) {
		t.Error("Permanent/IsPermanent")
	}
}

// Run waits for the informers it was given and returns without a worker
// when the context ends first; the queue is released either way.
func TestRunWaitsForCacheSync(t *testing.T) {
	var synced atomic.Bool
	var calls atomic.Int32
	l := workloop.New("waits-for-sync", func(context.Context, string) error { calls.Add(1); return nil }, workloop.Options{})
	l.WaitFor(synced.Load)
	l.Add("k")
	stop := run(t, l)
	// Not synced: nothing runs (checked again once it is synced).
	synced.Store(true)
	eventually(t, "the sync after the cache synced", func() bool { return calls.Load() == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	never := workloop.New("never-synced", func(context.Context, string) error { t.Error("synced"); return nil }, workloop.Options{})
	never.WaitFor(func() bool { return false })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := never.Run(ctx); err != nil {
		t.Fatalf("Run = %v", err)
	}
	never.Add("k") // ignored: the queue is shut down
	if never.Len() != 0 {
		t.Error("the queue still takes keys after Run returned")
	}
}

func TestRunWorkersValidates(t *testing.T) {
	l := workloop.New("bad-workers", func(context.Context, string) error { return nil }, workloop.Options{})
	err := l.RunWorkers(context.Background(), 0)
	if err == nil || !strings.Contains(err.Error(), "bad-workers") || !strings.Contains(err.Error(), "workers must be at least 1") {
		t.Fatalf("RunWorkers(0) = %v", err)
	}
}

func TestRegisterMetricsTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if err := workloop.RegisterMetrics(reg); err != nil {
			t.Fatalf("RegisterMetrics: %v", err)
		}
	}
}
