//go:build integration

package integration

import (
	"context"
	"testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/testenv"
)

func widgetInit(context.Context, descriptor.Context) (descriptor.Controller, error) {
	return descriptor.ControllerFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
}

// TestREADMETestenvSnippet runs docs/testing.md's testenv snippet as written,
// twice at once in one test: zero Options never collide on a port.
func TestREADMETestenvSnippet(t *testing.T) {
	ctx := t.Context()
	// snippet:begin
	env, err := testenv.Start(ctx, testenv.Options{Users: []testenv.User{{Name: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	// The zero Options: no leader election and no serving port, so any number
	// of Managers run side by side in one test (mount m.Handler(), or set
	// Serving.SecurePort to serving.PortEphemeral and read m.ServingAddr()).
	m, err := manager.NewBuilder("it").WithRESTConfig(env.Config()).
		Register(descriptor.New("widget-controller", widgetInit)).
		Build()
	// snippet:end
	if err != nil {
		t.Fatal(err)
	}
	m2, err := manager.NewBuilder("it").WithRESTConfig(env.Config()).
		Register(descriptor.New("widget-controller", widgetInit)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	early1, early2 := runManager(t, m), runManager(t, m2)
	for _, mm := range []*manager.Manager{m, m2} {
		poll.UntilContext(t, "both Managers run their controller",
			func(context.Context) (bool, error) {
				st, _ := mm.Status("widget-controller")
				return st.Phase == manager.PhaseRunning, nil
			})
	}
	select {
	case err := <-early1:
		t.Fatalf("first Manager stopped: %v", err)
	case err := <-early2:
		t.Fatalf("second Manager stopped: %v", err)
	default:
	}
}
