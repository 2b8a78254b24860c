package builtin_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// The built-ins that index pods share one index per key, as KCM's share
// its podNodeName index: one index declared under two names would be kept
// twice on the one pod informer (the daemonset, node lifecycle and taint
// eviction controllers each had a by-node index of their own). Two
// declared pod indexes that key a set of varied pods alike must be one.
func TestBuiltinsSharePodIndexes(t *testing.T) {
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	yes := true
	bound := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.PodSpec{NodeName: node}}
	}
	owned := bound("owned", "n2")
	owned.OwnerReferences = []metav1.OwnerReference{
		{Kind: "ReplicaSet", Name: "rs", UID: "u", Controller: &yes}}
	claims := bound("claims", "")
	claims.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
	samples := []*corev1.Pod{bound("bound", "n1"), bound("unbound", ""), owned, claims}
	byKeys := map[string]string{} // the keys an index gives the samples → its name
	for _, b := range builtin.NewOptions().List() {
		for name, f := range b.Descriptor.Indexers(pods) {
			var keys []string
			for _, p := range samples {
				k, err := f(p)
				if err != nil {
					t.Fatalf("%s: index %s: %v", b.Descriptor.Name(), name, err)
				}
				keys = append(keys, fmt.Sprint(k))
			}
			sig := strings.Join(keys, ";")
			if strings.Trim(sig, "[];") == "" {
				continue // no sample is indexed: the samples cannot tell it apart
			}
			if other, ok := byKeys[sig]; ok && other != name {
				t.Errorf("%s: pod index %q keys pods as %q does; share one "+
					"(controllers/internal/index)", b.Descriptor.Name(), name, other)
			}
			byKeys[sig] = name
		}
	}
}
