package hpa_test

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/hpa"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

func TestDescriptor(t *testing.T) {
	controllertest.CheckIdentity(t, hpa.Descriptor(hpa.NewOptions()), controllertest.Identity{
		Name: "horizontal-pod-autoscaler-controller", Alias: "horizontalpodautoscaling",
		EventSource: "horizontal-pod-autoscaler"})
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		flag, def, arg string
		check          func(hpa.Options) bool
	}{
		{"concurrent-horizontal-pod-autoscaler-syncs", "5", "7",
			func(o hpa.Options) bool { return o.ConcurrentSyncs == 7 }},
		{"horizontal-pod-autoscaler-sync-period", "15s", "3s",
			func(o hpa.Options) bool { return o.SyncPeriod == 3*time.Second }},
		{"horizontal-pod-autoscaler-downscale-stabilization", "5m0s", "1m",
			func(o hpa.Options) bool { return o.DownscaleStabilization == time.Minute }},
		{"horizontal-pod-autoscaler-tolerance", "0.1", "0.2",
			func(o hpa.Options) bool { return o.Tolerance == 0.2 }},
		{"horizontal-pod-autoscaler-cpu-initialization-period", "5m0s", "2m",
			func(o hpa.Options) bool { return o.CPUInitializationPeriod == 2*time.Minute }},
		{"horizontal-pod-autoscaler-initial-readiness-delay", "30s", "10s",
			func(o hpa.Options) bool { return o.InitialReadinessDelay == 10*time.Second }},
	} {
		o := hpa.NewOptions()
		f := controllertest.ParseFlag(t, o.AddFlags, tc.flag, "--"+tc.flag+"="+tc.arg)
		if f.DefValue != tc.def {
			t.Errorf("--%s default %q, want KCM's %q", tc.flag, f.DefValue, tc.def)
		}
		if !tc.check(o) {
			t.Errorf("--%s=%s not applied: %+v", tc.flag, tc.arg, o)
		}
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	bad := hpa.NewOptions()
	bad.ConcurrentSyncs, bad.SyncPeriod, bad.Tolerance = 0, 0, -1
	bad.CPUInitializationPeriod = -time.Second
	controllertest.CheckBuild(t, hpa.Descriptor(hpa.NewOptions()))
	controllertest.CheckBuild(t, hpa.Descriptor(bad),
		"--concurrent-horizontal-pod-autoscaler-syncs: must be at least 1, got 0",
		"--horizontal-pod-autoscaler-sync-period: must be positive, got 0s",
		"--horizontal-pod-autoscaler-tolerance: must be a finite number at least 0, got -1",
		"--horizontal-pod-autoscaler-cpu-initialization-period: must not be negative, got -1s")
}

func TestFeatureSpecs(t *testing.T) {
	want := map[featuregate.Feature]bool{
		hpa.FeatureHPAConfigurableTolerance: true, hpa.FeatureHPAGeneration: true,
		hpa.FeatureHPAScaleToZero: true, hpa.FeatureHPAOptimizedSelectorStore: true,
		hpa.FeatureStaleControllerConsistencyHPA: true, hpa.FeaturePodLevelResources: true,
	}
	specs := hpa.FeatureSpecs()
	if len(specs) != len(want) {
		t.Errorf("%d gates, want %d", len(specs), len(want))
	}
	for f, def := range want {
		if s, ok := specs[f]; !ok || s.Default != def {
			t.Errorf("gate %s: %+v, want default %v", f, s, def)
		}
	}
	if err := featuregate.NewFeatureGate().Add(specs); err != nil {
		t.Fatalf("the specs do not register: %v", err)
	}
}

// TestRunWithCancelledContext: with a REST config, Init builds the
// clients without calling the API server, and Run releases the queue when
// the term ended before it started. Without one (a host over ready-made
// clients), the controller is not started: Init returns no controller and
// no error, so the host's other controllers run.
func TestRunWithCancelledContext(t *testing.T) {
	d := hpa.Descriptor(hpa.NewOptions())
	c, err := controllertest.Init(t, d, &rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	controllertest.RunCancelled(t, c)
	if c, err := controllertest.Init(t, d, nil); c != nil || err != nil {
		t.Errorf("Init without a config = %v, %v; want not started (nil, nil)", c, err)
	}
}
