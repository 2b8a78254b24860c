package manager_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// A lease lost while the term is already stopping, for whatever reason the
// stop began, cuts the wait to what is left of the stop budget, and Run
// reports the loss. Before the fix the term waited the whole
// ControllerShutdownTimeout and Run returned nil.
func TestLeaseLostWhileStopping(t *testing.T) {
	for _, tc := range []struct {
		name  string
		begin func(h *managertest.Harness, failNow chan<- struct{})
		want  []error
	}{
		{
			name:  "stop began by cancellation",
			begin: func(h *managertest.Harness, _ chan<- struct{}) { cancelRun(h) },
			want:  []error{leader.ErrLeaseLost, manager.ErrShutdownTimeout},
		},
		{
			name:  "stop began by a failed controller",
			begin: func(_ *managertest.Harness, failNow chan<- struct{}) { close(failNow) },
			want:  []error{leader.ErrLeaseLost, manager.ErrShutdownTimeout, manager.ErrControllerFailed},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			failNow := make(chan struct{})
			var failing atomic.Bool
			h := managertest.New(t, "stopping-manager", []descriptor.Descriptor{
				descriptor.New("slow-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
					return descriptor.ControllerFunc(func(ctx context.Context) error {
						<-ctx.Done()
						failing.Store(true) // the API server goes away while it stops
						<-release
						return nil
					}), nil
				}),
				descriptor.New("failing-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
					return descriptor.ControllerFunc(func(ctx context.Context) error {
						select {
						case <-failNow:
							return errors.New("boom")
						case <-ctx.Done():
							return nil
						}
					}), nil
				}),
			})
			failLeaseUpdates(h.Client, &failing)
			h.Options = fastElection("only")
			h.Options.ControllerShutdownTimeout = time.Hour
			h.Start()
			h.WaitRunning("slow-controller", "failing-controller")
			tc.begin(h, failNow)
			err := runErr(t, h) // bounded far below an hour
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("Run = %v, want it to wrap %v", err, want)
				}
			}
			if err != nil && (!strings.Contains(err.Error(), "slow-controller") || !strings.Contains(err.Error(), "stop budget")) {
				t.Errorf("Run = %v, want the straggler named and the stop budget as the limit", err)
			}
		})
	}
}

// failLeaseUpdatesNamed makes updates of one lease fail while on is true.
func failLeaseUpdatesNamed(cs *fake.Clientset, name string, on *atomic.Bool) {
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l, ok := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if ok && l.Name == name && on.Load() {
			return true, nil, errors.New("injected: main lease unreachable")
		}
		return false, nil, nil
	})
}

// Under the recampaign policy, losing the main lock ends the migration term
// and releases the migration lock; it is sought again only once the main
// lock is held again: every migration term starts inside a main term and
// has ended before the next main term starts.
func TestMigrationEndsWithMainTerm(t *testing.T) {
	act := &activity{active: map[string]int{}}
	h := migrationHarness(t, act)
	var failing atomic.Bool
	failLeaseUpdatesNamed(h.Client, "mig-manager", &failing)
	h.Options.LostLeasePolicy = leader.Recampaign
	h.Start()
	h.WaitRunning("main-controller", "node-route-controller")

	failing.Store(true)
	managertest.Eventually(t, "both terms stopped", func() bool { return len(act.leaders()) == 0 })
	// The migration lock is released once its term has stopped, which is a
	// moment after its controllers returned; and before the main lock is
	// sought again, which cannot happen while its updates fail.
	managertest.Eventually(t, "the migration lock released after the main lock was lost",
		func() bool { return leaseHolder(h, "test-migration") != "me" })
	failing.Store(false)
	managertest.Eventually(t, "both running again", func() bool {
		m, _ := h.Manager.Status("main-controller")
		g, _ := h.Manager.Status("node-route-controller")
		return m.Phase == manager.PhaseRunning && m.Starts == 2 && g.Phase == manager.PhaseRunning && g.Starts == 2
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	act.mu.Lock()
	defer act.mu.Unlock()
	var mains []interval
	for _, iv := range act.intervals {
		if iv.replica == "main" {
			mains = append(mains, iv)
		}
	}
	// The intervals are the controllers' (from Run to its return), not the
	// terms': the migration term starts once the main term runs, but its
	// controller may be called a moment before the main term's own is. So
	// a migration controller must overlap a main controller's run, begin
	// after the one before it ended and end before the one after it began.
	for _, mig := range act.intervals {
		if mig.replica != "migration" {
			continue
		}
		inside := false
		for i, main := range mains {
			if mig.end.Before(main.start) || main.end.Before(mig.start) {
				continue // no overlap
			}
			afterPrev := i == 0 || mains[i-1].end.Before(mig.start)
			beforeNext := i+1 == len(mains) || mig.end.Before(mains[i+1].start)
			inside = afterPrev && beforeNext
		}
		if !inside {
			t.Errorf("migration controller %v–%v did not run within one main term: %+v",
				mig.start, mig.end, act.intervals)
		}
	}
}

func leaseHolder(h *managertest.Harness, name string) string {
	l, err := h.Client.CoordinationV1().Leases("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// Defect: a lost main lease left the main controllers no stop budget. The
// main term waited for the migration term (whose own lease was valid, so
// its deadline was the shutdown timeout) before telling its controllers to
// stop; Run blamed them with ErrShutdownTimeout; the migration Lease was
// renewed after Run returned. Now both are told to stop at once, both
// bounded by the main lease's stop budget; the migrated controller that
// did not stop is the one named; nothing renews a Lease after Run returned.
func TestMainLeaseLostStopsMigrationAtOnce(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var mu sync.Mutex
	var mainStopped, migratedAbandoned time.Time
	h := migrationHarnessOf(t,
		descriptor.New("main-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				<-ctx.Done()
				mu.Lock()
				mainStopped = time.Now()
				mu.Unlock()
				return nil
			}), nil
		}),
		descriptor.New("node-route-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				<-ctx.Done()
				<-release // far slower to stop than any stop budget
				return nil
			}), nil
		}).WithAliases("route"))
	h.Options.LeaderElection.LeaseDuration = 3 * time.Second
	h.Options.LeaderElection.RenewDeadline = 1400 * time.Millisecond
	h.Options.LeaderElection.RetryPeriod = 300 * time.Millisecond
	h.Options.ControllerShutdownTimeout = time.Hour
	var failing, returned atomic.Bool
	var lateWrites atomic.Int32
	h.Client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if returned.Load() {
			lateWrites.Add(1)
		}
		return false, nil, nil
	})
	failLeaseUpdatesNamed(h.Client, "mig-manager", &failing)
	h.Start()
	h.WaitRunning("main-controller", "node-route-controller")
	failing.Store(true)
	err := h.Err()
	returned.Store(true)
	migratedAbandoned = time.Now()

	if !errors.Is(err, leader.ErrLeaseLost) || !errors.Is(err, manager.ErrShutdownTimeout) {
		t.Fatalf("Run = %v, want ErrLeaseLost and ErrShutdownTimeout", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "node-route-controller") || strings.Contains(msg, "[main-controller]") {
		t.Errorf("Run = %v, want the migrated controller named as the straggler, not the main one", err)
	}
	mu.Lock()
	stopped := mainStopped
	mu.Unlock()
	if stopped.IsZero() || !stopped.Before(migratedAbandoned) {
		t.Errorf("the main controller was told to stop at %v, not before the migrated one was abandoned at %v",
			stopped, migratedAbandoned)
	}
	// client-go renews every RetryPeriod: three periods without a write.
	quiet := time.NewTimer(3 * h.Options.LeaderElection.RetryPeriod)
	<-quiet.C
	if n := lateWrites.Load(); n > 0 {
		t.Errorf("%d Lease writes after Run returned", n)
	}
}

// A controller that waits on InformersStarted without watching its context
// still returns when another InitFunc fails: the term closes
// InformersStarted on its way out.
func TestInformersStartedClosesWhenInitFails(t *testing.T) {
	h := managertest.New(t, "init-fail-manager", []descriptor.Descriptor{
		descriptor.New("waiting-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(func(context.Context) error {
				<-cc.InformersStarted // as the package example does
				return nil
			}), nil
		}),
		descriptor.New("broken-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return nil, errors.New("cannot build")
		}),
	})
	h.Options.ControllerShutdownTimeout = time.Hour
	h.Start()
	err := runErr(t, h)
	if !errors.Is(err, manager.ErrControllerFailed) || errors.Is(err, manager.ErrShutdownTimeout) {
		t.Fatalf("Run = %v, want ErrControllerFailed and every controller stopped", err)
	}
	if st, _ := h.Manager.Status("waiting-controller"); st.Phase != manager.PhaseStopped {
		t.Errorf("waiting-controller: %+v, want stopped", st)
	}
}

// An InitFunc that blocks past cancellation is bounded by the shutdown
// timeout, named, and Run returns.
func TestBlockingInitFuncIsBounded(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{})
	h := managertest.New(t, "blocking-init-manager", []descriptor.Descriptor{
		descriptor.New("stuck-init-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			close(entered)
			<-release // ignores its context
			return descriptor.ControllerFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
		}),
	})
	h.Options.ControllerShutdownTimeout = 200 * time.Millisecond
	h.Start()
	select {
	case <-entered:
	case <-time.After(managertest.DefaultTimeout):
		t.Fatal("InitFunc not called")
	}
	cancelRun(h)
	err := runErr(t, h)
	if !errors.Is(err, manager.ErrShutdownTimeout) || !strings.Contains(err.Error(), "stuck-init-controller (InitFunc)") {
		t.Fatalf("Run = %v, want ErrShutdownTimeout naming the InitFunc", err)
	}
	if st, _ := h.Manager.Status("stuck-init-controller"); st.Phase != manager.PhaseFailed {
		t.Errorf("status %+v, want failed", st)
	}
}

// cancelRun cancels the harness's Run without waiting for it.
func cancelRun(h *managertest.Harness) { go func() { _ = h.Stop() }() }

// runErr waits, with a deadline, for Run to return and gives its error.
func runErr(t *testing.T, h *managertest.Harness) error {
	t.Helper()
	select {
	case <-h.Done():
		return h.Err()
	case <-time.After(managertest.DefaultTimeout):
		t.Fatalf("Run did not return within %v", managertest.DefaultTimeout)
		return nil
	}
}

// stubbornController ignores its context until release is closed.
type stubbornController struct{ release <-chan struct{} }

func (s stubbornController) Run(context.Context) error {
	<-s.release
	return nil
}

// An abandoned controller leaves only its own goroutine behind: the term
// waits for its controllers without a helper goroutine of its own.
func TestAbandonedControllerLeavesOnlyItsGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	release := make(chan struct{})
	h := managertest.New(t, "abandon-manager", []descriptor.Descriptor{
		descriptor.New("stubborn-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return stubbornController{release}, nil
		}),
	})
	h.Options.ControllerShutdownTimeout = 100 * time.Millisecond
	h.Start()
	h.WaitRunning("stubborn-controller")
	cancelRun(h)
	if err := runErr(t, h); !errors.Is(err, manager.ErrShutdownTimeout) {
		t.Fatalf("Run = %v, want ErrShutdownTimeout", err)
	}
	if err := goleak.Find(before, goleak.IgnoreAnyFunction("github.com/ctrlhost/ctrlhost/manager_test.stubbornController.Run")); err != nil {
		t.Errorf("goroutines left behind the abandoned controller: %v", err)
	}
	close(release)
}

// On SIGTERM (cancellation), a controller that ignores its context past
// the shutdown timeout keeps the lease from being released: another replica
// can only take over once it expired. Releasing it let a follower start
// while the straggler still ran (found by the chaos suite).
func TestStragglerKeepsTheLease(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := managertest.New(t, "straggler-manager", []descriptor.Descriptor{
		descriptor.New("stubborn-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return stubbornController{release}, nil
		}),
	})
	h.Options = fastElection("a")
	h.Options.ControllerShutdownTimeout = 100 * time.Millisecond
	h.Start()
	h.WaitRunning("stubborn-controller")
	cancelRun(h)
	if err := runErr(t, h); !errors.Is(err, manager.ErrShutdownTimeout) || !errors.Is(err, leader.ErrTermStillRunning) {
		t.Fatalf("Run = %v, want ErrShutdownTimeout wrapping leader.ErrTermStillRunning", err)
	}
	l, err := h.Client.CoordinationV1().Leases("kube-system").Get(context.Background(), "straggler-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "a" {
		t.Errorf("lease holder after Run returned = %v, want a (not released while a controller may still act)", l.Spec.HolderIdentity)
	}
}
