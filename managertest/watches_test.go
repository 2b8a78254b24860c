package managertest_test

import (
	"context"
	"testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// TestWatches: a controller's informer's watch counts as open while it
// runs, and no longer once the Manager stopped.
func TestWatches(t *testing.T) {
	init := func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		cc.InformerFactory.Core().V1().ConfigMaps().Informer()
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}), nil
	}
	h := managertest.New(t, "test", []descriptor.Descriptor{descriptor.New("cm-controller", init)})
	if n := h.Watches("configmaps"); n != 0 {
		t.Fatalf("Watches before Start = %d", n)
	}
	h.Start()
	managertest.Eventually(t, "the ConfigMaps watch is open", func() bool {
		return h.Watches("configmaps") == 1
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the ConfigMaps watch is closed", func() bool {
		return h.Watches("configmaps") == 0
	})
}
