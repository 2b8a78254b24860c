package manager_test

import (
	"context"
	"errors"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
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
