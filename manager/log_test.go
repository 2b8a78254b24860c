package manager_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// TestEveryLogLineNamesTheComponent: serving's, leader election's and the
// terms' lines all carry the component, so that two Managers in one
// process can be told apart (they lacked it in serving and election).
func TestEveryLogLineNamesTheComponent(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	init := func(context.Context, descriptor.Context) (descriptor.Controller, error) {
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			logr.FromContextOrDiscard(ctx).Info("Controller's own line")
			<-ctx.Done()
			return nil
		}), nil
	}
	h := managertest.New(t, "named-manager",
		[]descriptor.Descriptor{descriptor.New("x-controller", init)})
	h.Builder.WithLogger(funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{}))
	h.Options = fastElection("a")
	h.Start()
	h.WaitRunning("x-controller")
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var serving, election, own bool
	for _, l := range lines {
		if !strings.Contains(l, `"component"="named-manager"`) {
			t.Errorf("a line without the component: %s", l)
		}
		serving = serving || strings.HasPrefix(l, "serving ")
		election = election || strings.HasPrefix(l, "leader-election ")
		own = own || strings.Contains(l, "Controller's own line")
	}
	if !serving || !election || !own {
		t.Errorf("lines seen: serving %v, leader election %v, the controller's own %v; "+
			"want all three", serving, election, own)
	}
}
