package builtin_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/ctrlhost/ctrlhost/controllers/builtin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestListIsComplete: one Options struct field per built-in package under
// controllers/, every listed controller once.
func TestListIsComplete(t *testing.T) {
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	var packages int
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "internal" || e.Name() == "builtin" {
			continue
		}
		// A module of its own (vapstatus, for its k8s.io/apiserver
		// dependency) is not in this module's list.
		if _, err := os.Stat(filepath.Join("..", e.Name(), "go.mod")); err == nil {
			continue
		}
		packages++
	}
	// Every struct field is a package's options (the others, such as
	// ClusterName, are KCM's shared flags).
	var fields int
	for f := range reflect.TypeFor[builtin.Options]().Fields() {
		if f.Type.Kind() == reflect.Struct {
			fields++
		}
	}
	if fields != packages {
		t.Errorf("Options has %d packages' options, controllers/ has %d built-in packages",
			fields, packages)
	}
	seen := map[string]bool{}
	for _, d := range builtin.NewOptions().Descriptors() {
		if seen[d.Name()] {
			t.Errorf("%s listed twice", d.Name())
		}
		seen[d.Name()] = true
	}
	if len(seen) != 40 {
		t.Errorf("%d built-ins listed, want 40", len(seen))
	}
}

// TestAddFlags: AddFlags adds every listed built-in's flags, once, bound to
// the Options that Descriptors reads.
func TestAddFlags(t *testing.T) {
	o := builtin.NewOptions()
	fs := pflag.NewFlagSet("kcm", pflag.ContinueOnError)
	o.AddFlags(fs)
	for _, b := range o.List() {
		if b.AddFlags == nil {
			continue
		}
		own := pflag.NewFlagSet(b.Descriptor.Name(), pflag.ContinueOnError)
		b.AddFlags(own)
		own.VisitAll(func(f *pflag.Flag) {
			if fs.Lookup(f.Name) == nil {
				t.Errorf("%s: --%s is not added by Options.AddFlags", b.Descriptor.Name(), f.Name)
			}
		})
	}
	if err := fs.Parse([]string{"--concurrent-replicaset-syncs=9",
		"--cluster-name=kubernetes"}); err != nil {
		t.Fatal(err)
	}
	if o.ReplicaSet.ConcurrentReplicaSetSyncs != 9 {
		t.Errorf("--concurrent-replicaset-syncs=9 left the option at %d",
			o.ReplicaSet.ConcurrentReplicaSetSyncs)
	}
}

// TestNewFeatureGate: the gate knows every gate a built-in consults, at its
// default, and --feature-gates can set one.
func TestNewFeatureGate(t *testing.T) {
	specs, err := builtin.FeatureSpecs()
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) == 0 {
		t.Fatal("no feature gate listed; the workload controllers consult several")
	}
	g, err := builtin.NewFeatureGate()
	if err != nil {
		t.Fatal(err)
	}
	for f, spec := range specs {
		if g.Enabled(f) != spec.Default {
			t.Errorf("%s: enabled %v, default %v", f, g.Enabled(f), spec.Default)
		}
	}
	if err := g.Set("PodDeletionCost=false"); err != nil {
		t.Errorf("setting a built-in's gate: %v", err)
	}
}
