package resourcequota_test

import (
	"testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/resourcequota"
)

func TestDescriptorAndFlags(t *testing.T) {
	controllertest.CheckIdentity(
		t,
		resourcequota.Descriptor(resourcequota.NewOptions()),
		controllertest.Identity{
			Name: "resourcequota-controller", Alias: "resourcequota",
		},
	)
	o := resourcequota.NewOptions()
	f := controllertest.ParseFlag(
		t,
		o.AddFlags,
		"concurrent-resource-quota-syncs",
		"--concurrent-resource-quota-syncs=9",
		"--resource-quota-sync-period=1m",
	)
	if f.DefValue != "5" {
		t.Errorf("--concurrent-resource-quota-syncs default %q, want 5", f.DefValue)
	}
	fresh := resourcequota.NewOptions()
	p := controllertest.FlagSet(fresh.AddFlags).Lookup("resource-quota-sync-period")
	if p == nil || p.DefValue != "5m0s" ||
		p.Usage != "The period for syncing quota usage status in the system" {
		t.Errorf("--resource-quota-sync-period: %+v", p)
	}
	if o.ConcurrentResourceQuotaSyncs != 9 || o.ResourceQuotaSyncPeriod.String() != "1m0s" {
		t.Errorf("parsed %+v", o)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       resourcequota.Options
		wantErr []string
	}{
		{"defaults", resourcequota.NewOptions(), nil},
		{"zero value takes the defaults", resourcequota.Options{}, nil},
		{
			"negative workers and period",
			resourcequota.Options{ConcurrentResourceQuotaSyncs: -1, ResourceQuotaSyncPeriod: -1},
			[]string{
				`--concurrent-resource-quota-syncs: must be at least 1, got -1`,
				`--resource-quota-sync-period: must be positive (for example 5m), got -1ns`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, resourcequota.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

func TestFeatureSpecs(t *testing.T) {
	s, ok := resourcequota.FeatureSpecs()[resourcequota.FeaturePodLevelResources]
	if !ok || !s.Default {
		t.Errorf("PodLevelResources spec %+v, want on by default (Kubernetes 1.37)", s)
	}
}

// TestRunWithCancelledContext: Run returns and releases both queues even
// when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(
		t,
		resourcequota.Descriptor(resourcequota.NewOptions()),
	)
}
