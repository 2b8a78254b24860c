package endpointslice_test

import (
	"testing"
	"time"

	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/endpointslice"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

func TestDescriptorAndFlags(t *testing.T) {
	controllertest.CheckIdentity(t, endpointslice.Descriptor(endpointslice.NewOptions()), controllertest.Identity{
		Name: "endpointslice-controller", Alias: "endpointslice",
	})
	tests := []struct {
		flag, arg, def string
		check          func(endpointslice.Options) bool
	}{
		{"concurrent-service-endpoint-syncs", "--concurrent-service-endpoint-syncs=9", "5",
			func(o endpointslice.Options) bool { return o.ConcurrentServiceEndpointSyncs == 9 }},
		{"max-endpoints-per-slice", "--max-endpoints-per-slice=7", "100",
			func(o endpointslice.Options) bool { return o.MaxEndpointsPerSlice == 7 }},
		{"endpointslice-updates-batch-period", "--endpointslice-updates-batch-period=2s", "0s",
			func(o endpointslice.Options) bool { return o.EndpointUpdatesBatchPeriod == 2*time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			o := endpointslice.NewOptions()
			f := controllertest.ParseFlag(t, o.AddFlags, tt.flag, tt.arg)
			if f.DefValue != tt.def || f.Usage == "" {
				t.Errorf("default %q (want %q), usage %q", f.DefValue, tt.def, f.Usage)
			}
			if !tt.check(o) {
				t.Errorf("%s did not set the option: %+v", tt.arg, o)
			}
		})
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	const prefix = `descriptor "endpointslice-controller": `
	tests := []struct {
		name    string
		o       endpointslice.Options
		wantErr []string
	}{
		{"defaults", endpointslice.NewOptions(), nil},
		{"zero value takes the defaults", endpointslice.Options{}, nil},
		{"too many workers", endpointslice.Options{ConcurrentServiceEndpointSyncs: 51},
			[]string{prefix + "--concurrent-service-endpoint-syncs: must be between 1 and 50, got 51"}},
		{"negative workers", endpointslice.Options{ConcurrentServiceEndpointSyncs: -1},
			[]string{"--concurrent-service-endpoint-syncs: must be between 1 and 50, got -1"}},
		{"slices too big", endpointslice.Options{MaxEndpointsPerSlice: 1001},
			[]string{"--max-endpoints-per-slice: must be between 1 and 1000, got 1001"}},
		{"negative batch period", endpointslice.Options{EndpointUpdatesBatchPeriod: -time.Second},
			[]string{"--endpointslice-updates-batch-period: must not be negative, got -1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, endpointslice.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

func TestFeatureSpecs(t *testing.T) {
	spec, ok := endpointslice.FeatureSpecs()[endpointslice.FeaturePreferSameTrafficDistribution]
	if !ok || !spec.Default || spec.PreRelease != featuregate.GA || !spec.LockToDefault {
		t.Errorf("PreferSameTrafficDistribution spec %+v, want GA, on and locked (Kubernetes 1.37)", spec)
	}
}

// TestRunWithCancelledContext: Run returns and releases the queue (its
// goroutines) even when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, endpointslice.Descriptor(endpointslice.NewOptions()))
}
