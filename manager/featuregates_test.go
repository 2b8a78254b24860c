package manager_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// TestFeatureGatesFlag: --feature-gates sets the Builder's gate, which the
// descriptors' required gates are checked against; an unknown gate, a bad
// value and a gate that cannot be set are errors naming the flag.
func TestFeatureGatesFlag(t *testing.T) {
	const gated featuregate.Feature = "ShinyThing"
	newGate := func() featuregate.MutableFeatureGate {
		fg := featuregate.NewFeatureGate()
		if err := fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{gated: {Default: true, PreRelease: featuregate.Beta}}); err != nil {
			t.Fatal(err)
		}
		return fg
	}
	d := descriptor.New("shiny-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
		return nil, nil
	}).WithFeatureGates(gated)
	build := func(args []string, fg featuregate.FeatureGate) (*manager.Manager, error) {
		var o manager.Options
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		o.Serving.SecurePort = 0
		return manager.NewBuilder("gates").WithClient(fake.NewClientset(), metadatafake.NewSimpleMetadataClient(runtime.NewScheme())).
			WithOptions(o).WithFeatureGate(fg).Register(d).Build()
	}
	for _, tc := range []struct {
		args      []string
		wantPhase manager.Phase
	}{
		{nil, manager.PhaseWaiting},
		{[]string{"--feature-gates=ShinyThing=false"}, manager.PhaseSkipped},
		{[]string{"--feature-gates=ShinyThing=false,ShinyThing=true"}, manager.PhaseWaiting},
	} {
		m, err := build(tc.args, newGate())
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if st, _ := m.Status("shiny-controller"); st.Phase != tc.wantPhase {
			t.Errorf("%v: phase %s, want %s", tc.args, st.Phase, tc.wantPhase)
		}
	}
	for _, tc := range []struct {
		args []string
		fg   featuregate.FeatureGate
		want string
	}{
		{[]string{"--feature-gates=Nope=true"}, newGate(), "--feature-gates: unknown gate(s) Nope; this program knows: "},
		{[]string{"--feature-gates=ShinyThing=maybe"}, newGate(), `"maybe" is not a boolean`},
		{[]string{"--feature-gates=ShinyThing"}, newGate(), "want Name=true or Name=false"},
		{[]string{"--feature-gates=ShinyThing=true"}, readOnly{newGate()}, "cannot be set; pass a featuregate.MutableFeatureGate"},
	} {
		if _, err := build(tc.args, tc.fg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// readOnly hides a gate's mutability.
type readOnly struct{ featuregate.FeatureGate }

// Defect: Build set --feature-gates on the caller's gate even when it
// failed, and kept the caller's ClientBudgets map. Now a failed Build
// leaves the gate as it was, a successful one sets it, and the options
// the Manager runs with are its own copies.
func TestBuildLeavesTheCallersInputsAlone(t *testing.T) {
	const gated featuregate.Feature = "ShinyThing"
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{gated: {Default: true, PreRelease: featuregate.Beta}}); err != nil {
		t.Fatal(err)
	}
	budgets := map[string]manager.ClientBudget{"c": {QPS: 5}}
	o := manager.Options{FeatureGates: map[string]bool{string(gated): false}, ClientBudgets: budgets}
	o.Serving.SecurePort = 0
	build := func(controllers ...string) (*manager.Manager, error) {
		o.Controllers = controllers
		return manager.NewBuilder("gates").WithClient(fake.NewClientset(), nil).WithOptions(o).
			WithFeatureGate(fg).Register(descriptor.New("c", nop)).Build()
	}
	if _, err := build("no-such-controller"); err == nil {
		t.Fatal("Build with an unknown controller succeeded")
	}
	if !fg.Enabled(gated) {
		t.Error("a failed Build set --feature-gates on the caller's gate")
	}
	m, err := build("*")
	if err != nil {
		t.Fatal(err)
	}
	if fg.Enabled(gated) {
		t.Error("a successful Build did not set --feature-gates on the caller's gate")
	}
	budgets["c"] = manager.ClientBudget{QPS: 1000}
	if got := m.Options().ClientBudgets["c"].QPS; got != 5 {
		t.Errorf("the Manager's budget followed the caller's map: QPS %v, want 5", got)
	}
}

// TestSharedGateConflict: Managers given one feature gate must agree on
// the gates they set while they run. A Build that would flip a gate a
// running Manager set otherwise fails naming both, and leaves the gate
// (it was silently flipped under the first Manager's controllers); a
// Manager whose setting was changed after its Build refuses to Run; once
// the first has stopped, another setting is free.
func TestSharedGateConflict(t *testing.T) {
	const gate featuregate.Feature = "PodDeletionCost"
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		gate: {Default: true, PreRelease: featuregate.Beta}}); err != nil {
		t.Fatal(err)
	}
	build := func(component string, on bool) (*manager.Manager, error) {
		cs := fake.NewClientset()
		return manager.NewBuilder(component).
			WithClient(cs, metadatafake.NewSimpleMetadataClient(runtime.NewScheme())).
			WithFeatureGate(fg).
			WithOptions(manager.Options{FeatureGates: map[string]bool{string(gate): on}}).
			Build()
	}
	first, err := build("first", false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	// Run claims the gate before Elected closes (without election, as Run
	// starts). A conflicting Build before that would flip the gate and
	// rightly keep first from running, so the test waits for it: the
	// test polled Builds once, and a Build that came first failed it.
	select {
	case <-first.Elected():
	case err := <-done:
		t.Fatalf("first stopped before it ran: %v", err)
	case <-time.After(managertest.DefaultTimeout):
		t.Fatal("first did not start running")
	}
	_, conflict := build("second", true)
	want := `PodDeletionCost=true (manager "first" runs with ` +
		`PodDeletionCost=false on the same gate)`
	if conflict == nil || !strings.Contains(conflict.Error(), want) {
		t.Fatalf("a conflicting Build while first runs: %v, want an error naming both", conflict)
	}
	if fg.Enabled(gate) {
		t.Error("the refused Build changed the shared gate")
	}
	if _, err := build("agreeing", false); err != nil {
		t.Errorf("a Manager with the same setting: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// first has stopped: a new setting is free. A Manager built and not
	// yet run holds its setting: a Build that disagrees fails and leaves
	// the gate (TestSecondBuildReportsSharedGateConflict); a gate set
	// otherwise outside ctrlhost after a Manager's Build makes its Run
	// refuse.
	if _, err := build("later", true); err != nil {
		t.Fatalf("after first stopped: %v", err)
	}
	stale, err := build("stale", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := build("later-still", true); err == nil || fg.Enabled(gate) {
		t.Fatalf("a Build disagreeing with stale, built and not run: %v (gate set: %v)", err,
			fg.Enabled(gate))
	}
	if err := fg.SetFromMap(map[string]bool{string(gate): true}); err != nil {
		t.Fatal(err)
	}
	if err := stale.Run(t.Context()); err == nil ||
		!strings.Contains(err.Error(), "PodDeletionCost=false no longer holds") {
		t.Errorf("Run of a Manager whose setting was changed after its Build: %v", err)
	}
}
