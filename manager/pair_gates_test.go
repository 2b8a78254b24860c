package manager_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
)

// TestSecondBuildReportsSharedGateConflict: two Managers of one program
// share one feature gate (examples/pair). When their --feature-gates
// disagree, the second Build fails, naming the flag, both settings and
// what to do, and leaves the gate as the first set it (it used to flip
// the gate and leave the conflict to RunAll). A Manager that has run and
// returned, or that was dropped unrun, no longer holds its setting.
func TestSecondBuildReportsSharedGateConflict(t *testing.T) {
	const gate featuregate.Feature = "PodDeletionCost"
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		gate: {Default: true, PreRelease: featuregate.Beta}}); err != nil {
		t.Fatal(err)
	}
	build := func(component string, on bool) (*manager.Manager, error) {
		meta := metadatafake.NewSimpleMetadataClient(runtime.NewScheme())
		return manager.NewBuilder(component).WithLogger(logr.Discard()).
			WithClient(fake.NewClientset(), meta).
			WithFeatureGate(fg).
			WithOptions(manager.Options{FeatureGates: map[string]bool{string(gate): on},
				Serving: serving.Options{SecurePort: serving.PortDisabled}}).
			Build()
	}
	first, err := build("kube-controller-manager", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = build("pod-janitor", true)
	if err == nil {
		t.Fatal("the second Build, disagreeing on PodDeletionCost, succeeded")
	}
	for _, want := range []string{"--feature-gates", "PodDeletionCost=true",
		`"kube-controller-manager"`, "PodDeletionCost=false", "WithFeatureGate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the conflict does not say %q:\n%v", want, err)
		}
	}
	if fg.Enabled(gate) {
		t.Error("the refused Build flipped the shared gate")
	}
	if _, err := build("agreeing", false); err != nil {
		t.Errorf("a Manager with the same setting: %v", err)
	}

	// The agreeing one was dropped; once the first has run and returned,
	// nothing holds the setting any more.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := first.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := build("later", true); err != nil {
		t.Errorf("after the first returned: %v", err)
	}
	if !fg.Enabled(gate) {
		t.Error("a successful Build did not set the gate")
	}
}
