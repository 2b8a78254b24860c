package kcm_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app/options"

	"github.com/ctrlhost/ctrlhost/controllers/builtin"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// native is one native built-in of the list: its descriptor, its flags
// and the feature gates it consults.
type native struct {
	d     descriptor.Descriptor
	flags func(*pflag.FlagSet)
	gates map[featuregate.Feature]featuregate.FeatureSpec
}

// TestNativeBuiltinsAreKCMs: every native built-in has its upstream
// counterpart's canonical name, aliases and disabled-by-default flag;
// every flag it adds is a KCM flag with KCM's default; every feature gate
// it consults is a Kubernetes v1.37.1 gate with that default.
func TestNativeBuiltinsAreKCMs(t *testing.T) {
	up := app.NewControllerDescriptors()
	s, err := options.NewKubeControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	kcmFlags := s.Flags(app.KnownControllers(), app.ControllersDisabledByDefault(), app.ControllerAliases())
	// KCM registers some names with underscores (concurrent_rc_syncs) and
	// normalises "_" to "-" on its command line.
	lookup := func(name string) *pflag.Flag {
		var found *pflag.Flag
		for _, fs := range kcmFlags.FlagSets {
			fs.VisitAll(func(f *pflag.Flag) {
				if strings.ReplaceAll(f.Name, "_", "-") == name {
					found = f
				}
			})
		}
		return found
	}
	// Every flag of the list's AddFlags (the built-ins' and KCM's shared
	// --cluster-name) is KCM's, with KCM's default.
	all := pflag.NewFlagSet("builtin", pflag.ContinueOnError)
	builtin.NewOptions().AddFlags(all)
	all.VisitAll(func(f *pflag.Flag) {
		if k := lookup(f.Name); k == nil || k.DefValue != f.DefValue {
			t.Errorf("builtin.Options.AddFlags: --%s (default %q) is not KCM's (%v)",
				f.Name, f.DefValue, k)
		}
	})
	upGates := utilfeature.DefaultMutableFeatureGate.GetAll()
	for _, b := range builtin.NewOptions().List() {
		n := native{b.Descriptor, b.AddFlags, b.FeatureSpecs}
		u, ok := up[n.d.Name()]
		if !ok {
			t.Errorf("%s: not a kube-controller-manager controller", n.d.Name())
			continue
		}
		if got, want := n.d.Aliases(), u.GetAliases(); !slices.Equal(got, want) {
			t.Errorf("%s: aliases %v, KCM %v", n.d.Name(), got, want)
		}
		if n.d.IsDisabledByDefault() != u.IsDisabledByDefault() {
			t.Errorf("%s: disabled by default %v, KCM %v", n.d.Name(), n.d.IsDisabledByDefault(), u.IsDisabledByDefault())
		}
		if n.flags != nil {
			fs := pflag.NewFlagSet(n.d.Name(), pflag.ContinueOnError)
			n.flags(fs)
			fs.VisitAll(func(f *pflag.Flag) {
				k := lookup(f.Name)
				switch {
				case k == nil:
					t.Errorf("%s: --%s is not a KCM flag", n.d.Name(), f.Name)
				case k.DefValue != f.DefValue:
					t.Errorf("%s: --%s defaults to %q, KCM's to %q", n.d.Name(), f.Name, f.DefValue, k.DefValue)
				}
			})
		}
		for feature, spec := range n.gates {
			u, ok := upGates[feature]
			switch {
			case !ok:
				t.Errorf("%s: feature gate %s is not a Kubernetes v1.37.1 gate", n.d.Name(), feature)
			case u.Default != spec.Default:
				t.Errorf("%s: feature gate %s defaults to %v, Kubernetes v1.37.1 to %v", n.d.Name(), feature, spec.Default, u.Default)
			}
		}
	}
}
