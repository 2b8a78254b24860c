package namespace

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// newTestController wraps f's deleter in a controller whose cache holds
// cached.
func newTestController(t *testing.T, f *fixture, cached ...*corev1.Namespace) *controller {
	t.Helper()
	c := &controller{
		namespaces: corelisters.NewNamespaceLister(controllertest.ClusterIndexer(t, cached...)),
		deleter:    f.d,
		workers:    1,
	}
	c.loop = workloop.New(
		"test",
		c.sync,
		workloop.Options{
			Clock:       testingclock.NewFakeClock(t0),
			RateLimiter: rateLimiter(testingclock.NewFakeClock(t0)),
		},
	)
	t.Cleanup(c.loop.ShutDown)
	return c
}

// TestSyncRequeue: content remaining requeues after half the estimate and
// a second; an emptied namespace is done; one gone from the cache is not
// touched; a failure is retried with back-off.
func TestSyncRequeue(t *testing.T) {
	tests := []struct {
		name      string
		ns        *corev1.Namespace
		objs      []object
		cached    bool
		wantAfter time.Duration // RequeueAfter this
		wantErr   bool          // a plain (retried) error
		wantCalls bool          // the API was called
	}{
		{
			name:      "pod within a 30s grace period: 16s",
			ns:        namespace(10 * time.Second),
			objs:      []object{pod("p", 30, true)},
			cached:    true,
			wantAfter: 16 * time.Second,
			wantCalls: true,
		},
		{
			name:      "finalizers: 15s estimate, 8s",
			ns:        namespace(time.Minute),
			objs:      []object{obj(configMaps, "cm", "example.com/block")},
			cached:    true,
			wantAfter: 8 * time.Second,
			wantCalls: true,
		},
		{
			name:      "emptied",
			ns:        namespace(time.Minute),
			objs:      []object{obj(configMaps, "cm")},
			cached:    true,
			wantCalls: true,
		},
		{
			name: "not in the cache",
			ns:   namespace(time.Minute),
			objs: []object{obj(configMaps, "cm")},
		},
		{
			name:      "pod stuck past its grace period: retried",
			ns:        namespace(time.Minute),
			objs:      []object{pod("p", 30, true)},
			cached:    true,
			wantErr:   true,
			wantCalls: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.ns, tt.objs...)
			var cached []*corev1.Namespace
			if tt.cached {
				cached = append(cached, tt.ns)
			}
			c := newTestController(t, f, cached...)
			err := c.sync(controllertest.LogContext(t), "ns")
			var wantErr error
			if tt.wantAfter != 0 {
				wantErr = workloop.RequeueAfter(tt.wantAfter)
			}
			switch {
			case wantErr != nil && (err == nil || err.Error() != wantErr.Error()):
				t.Errorf("sync: %v, want %v", err, wantErr)
			case tt.wantErr && (err == nil || workloop.IsPermanent(err)):
				t.Errorf("sync: %v, want a retried error", err)
			case wantErr == nil && !tt.wantErr && err != nil:
				t.Errorf("sync: %v, want none", err)
			}
			if got := len(f.client.Actions()) > 0; got != tt.wantCalls {
				t.Errorf("API called: %v, want %v", got, tt.wantCalls)
			}
		})
	}
}

// TestHandlerDelaysDeletedNamespaces: a namespace being deleted is queued
// 5s after its event; others are not queued.
func TestHandlerDelaysDeletedNamespaces(t *testing.T) {
	f := newFixture(t, nil)
	clk := testingclock.NewFakeClock(t0)
	c := &controller{deleter: f.d}
	c.loop = workloop.New("test", c.sync, workloop.Options{Clock: clk})
	t.Cleanup(c.loop.ShutDown)

	c.namespaceChanged(&corev1.Namespace{})
	c.namespaceChanged(namespace(0))
	c.namespaceChanged("not a namespace")
	if n := c.loop.Len(); n != 0 {
		t.Fatalf("queued %d at once, want none before the delay", n)
	}
	clk.Step(deletionDelay - time.Millisecond)
	if n := c.loop.Len(); n != 0 {
		t.Fatalf("queued %d before the delay passed", n)
	}
	clk.Step(time.Millisecond)
	controllertest.WaitFor(
		t,
		"the deleted namespace to be queued",
		func() bool { return c.loop.Len() == 1 },
	)
}

// TestRetryLimits: one namespace's retries back off from 5ms to a minute;
// all namespaces' retries together get 100 at once, then 10 a second.
func TestRetryLimits(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	rl := rateLimiter(clk)
	var got []time.Duration
	for range 3 {
		got = append(got, rl.When("a"))
	}
	if want := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}; !slices.Equal(
		got,
		want,
	) {
		t.Errorf("back-off %v, want %v", got, want)
	}
	for range 30 {
		rl.When("a")
	}
	if d := rl.When("a"); d != time.Minute {
		t.Errorf("back-off capped at %v, want 1m", d)
	}
	rl.Forget("a")

	b := newBucket(clk, 10, 100)
	for i := range 100 {
		if d := b.When(fmt.Sprint(i)); d != 0 {
			t.Fatalf("retry %d delayed %v within the burst", i, d)
		}
	}
	if d := b.When("x"); d != 100*time.Millisecond {
		t.Errorf("first retry past the burst delayed %v, want 100ms", d)
	}
	if d := b.When("y"); d != 200*time.Millisecond {
		t.Errorf("second retry past the burst delayed %v, want 200ms", d)
	}
	clk.Step(time.Second)
	if d := b.When("z"); d != 0 {
		t.Errorf("after a second (10 tokens earned, 2 owed) delayed %v, want none", d)
	}
}

// TestPeriodicPassQueuesDeletingNamespaces: every sync period each
// namespace being deleted is queued again (after the usual delay), with no
// informer event: KCM gets this from its handler's resync period, which
// client-go raises to hours when the handler comes after the informer
// started, as on a warm standby's takeover.
func TestPeriodicPassQueuesDeletingNamespaces(t *testing.T) {
	live := namespace(0)
	live.Name, live.DeletionTimestamp = "live", nil
	f := newFixture(t, nil)
	c := newTestController(t, f, namespace(time.Minute), live)
	clk := testingclock.NewFakeClock(t0)
	c.loop = workloop.New("test", c.sync, workloop.Options{Clock: clk})
	t.Cleanup(c.loop.ShutDown)
	c.every, c.ticks = time.Minute, clk

	ctx, cancel := context.WithCancel(controllertest.LogContext(t))
	done := make(chan struct{})
	go func() { defer close(done); c.periodicPass(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	controllertest.WaitFor(t, "the pass's ticker", clk.HasWaiters)
	// Time goes on a second per poll; the deleting namespace must be
	// queued, and not before a period and the delay have passed.
	controllertest.WaitFor(t, "the deleting namespace to be queued", func() bool {
		clk.Step(time.Second)
		return c.loop.Len() > 0
	})
	if elapsed := clk.Since(t0); elapsed < time.Minute+deletionDelay {
		t.Errorf(
			"queued %v after the start, want at least a period and the delay (%v)",
			elapsed,
			time.Minute+deletionDelay,
		)
	}
	if n := c.loop.Len(); n != 1 {
		t.Errorf("queued %d, want only the namespace being deleted", n)
	}
}
