package disruption_test

import (
	"testing"

	"github.com/ctrlhost/ctrlhost/controllers/disruption"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

func TestDescriptor(t *testing.T) {
	d := disruption.Descriptor(disruption.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{Name: "disruption-controller",
		Alias: "disruption", EventSource: "controllermanager"})
	o := disruption.NewOptions()
	controllertest.ParseFlag(t, o.AddFlags, "concurrent-disruption-syncs",
		"--concurrent-disruption-syncs=3")
	if o.ConcurrentDisruptionSyncs != 3 || disruption.NewOptions().ConcurrentDisruptionSyncs != 1 {
		t.Errorf("--concurrent-disruption-syncs=3 gave %d (default %d), want 3 (default 1)",
			o.ConcurrentDisruptionSyncs, disruption.NewOptions().ConcurrentDisruptionSyncs)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := disruption.NewOptions()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.ConcurrentDisruptionSyncs = 0
	controllertest.CheckBuild(t, disruption.Descriptor(o), "--concurrent-disruption-syncs")
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, disruption.Descriptor(disruption.NewOptions()))
}
