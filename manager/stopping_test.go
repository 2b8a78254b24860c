package manager_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
	"github.com/ctrlhost/ctrlhost/serving"
)

// An InitFunc that fails because its term is stopping (its informers stop
// with the term) is given up as one still running is, not counted as a
// failed controller: the term is already ending for its own reason. Its
// result and the term's stop arrive together, so the term must prefer the
// stop (found by the simulation: seed 947, a term started as its Run was
// ending). Twenty rounds: each one-sided choice would pass half of them.
func TestAnInitFuncFailingAsItsTermStopsIsNoFailure(t *testing.T) {
	for round := range 20 {
		ctx, cancel := context.WithCancel(t.Context())
		d := descriptor.New("stopping-controller",
			func(ictx context.Context, _ descriptor.Context) (descriptor.Controller, error) {
				cancel()
				<-ictx.Done()
				return nil, errors.New("its informers have stopped")
			})
		m, err := manager.NewBuilder("test").WithClient(fake.NewClientset(), nil).
			WithOptions(manager.Options{Serving: serving.Options{SecurePort: serving.PortDisabled}}).
			WithLogger(discard).Register(d).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx); errors.Is(err, manager.ErrControllerFailed) {
			t.Fatalf("round %d: Run returned %v; the InitFunc failed only because its term "+
				"was stopping", round, err)
		}
		cancel()
	}
}

// A term's informers outlive its controllers on a warm set too: the set a
// term adopted stops when the term has stopped its controllers, as a
// term's own set does, not the moment Run's context ends (an InitFunc still
// building then found its informer stopped, and its "indexer was not
// added" error was taken for the controller's failure: simulation seed
// 947). The controller looks for 2 s after it was told to stop: the
// informer must still run.
func TestAWarmSetOutlivesItsTermsControllers(t *testing.T) {
	var stoppedUnderIt atomic.Bool
	d := descriptor.New("pods-controller",
		func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			inf := cc.InformerFactory.Core().V1().Pods().Informer()
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				<-ctx.Done()
				stoppedUnderIt.Store(poll.For(2*time.Second, inf.IsStopped))
				return nil
			}), nil
		}).WithInformers(podsGVR)
	h := managertest.New(t, "warm-manager", []descriptor.Descriptor{d}, somePods(2)...)
	h.Options = fastElection("a")
	h.Options.WarmStandby = true
	h.Start()
	h.WaitRunning("pods-controller")
	h.WaitHealthy("/readyz")
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if stoppedUnderIt.Load() {
		t.Error("the warm informer stopped while its controller was still running")
	}
}
