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

	"github.com/ctrlhost/ctrlhost/controllers/cronjob"
	"github.com/ctrlhost/ctrlhost/controllers/daemonset"
	"github.com/ctrlhost/ctrlhost/controllers/deployment"
	"github.com/ctrlhost/ctrlhost/controllers/endpoints"
	"github.com/ctrlhost/ctrlhost/controllers/endpointslice"
	"github.com/ctrlhost/ctrlhost/controllers/garbagecollector"
	"github.com/ctrlhost/ctrlhost/controllers/job"
	"github.com/ctrlhost/ctrlhost/controllers/namespace"
	"github.com/ctrlhost/ctrlhost/controllers/podgc"
	"github.com/ctrlhost/ctrlhost/controllers/replicaset"
	"github.com/ctrlhost/ctrlhost/controllers/resourcequota"
	"github.com/ctrlhost/ctrlhost/controllers/rootcacertpublisher"
	"github.com/ctrlhost/ctrlhost/controllers/serviceaccount"
	"github.com/ctrlhost/ctrlhost/controllers/serviceaccounttoken"
	"github.com/ctrlhost/ctrlhost/controllers/tokencleaner"
	"github.com/ctrlhost/ctrlhost/controllers/ttlafterfinished"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// native is one native built-in: its descriptor, its flags and the
// feature gates it consults.
type native struct {
	d     descriptor.Descriptor
	flags func(*pflag.FlagSet)
	gates map[featuregate.Feature]featuregate.FeatureSpec
}

func natives() []native {
	rs, gc, ca, ttl := replicaset.NewOptions(), podgc.NewOptions(), rootcacertpublisher.NewOptions(), ttlafterfinished.NewOptions()
	dep, ds, jb, cj := deployment.NewOptions(), daemonset.NewOptions(), job.NewOptions(), cronjob.NewOptions()
	sat, ns, rq := serviceaccounttoken.NewOptions(), namespace.NewOptions(), resourcequota.NewOptions()
	ep, eps, gcc := endpoints.NewOptions(), endpointslice.NewOptions(), garbagecollector.NewOptions()
	return []native{
		{replicaset.Descriptor(rs), rs.AddFlags, replicaset.FeatureSpecs()},
		{replicaset.ReplicationControllerDescriptor(rs), rs.AddFlags, replicaset.FeatureSpecs()},
		{podgc.Descriptor(gc), gc.AddFlags, nil},
		{serviceaccount.Descriptor(serviceaccount.NewOptions()), nil, nil},
		{tokencleaner.Descriptor(tokencleaner.NewOptions()), nil, nil},
		{rootcacertpublisher.Descriptor(ca), ca.AddFlags, nil},
		{ttlafterfinished.Descriptor(ttl), ttl.AddFlags, nil},
		{deployment.Descriptor(dep), dep.AddFlags, deployment.FeatureSpecs()},
		{daemonset.Descriptor(ds), ds.AddFlags, daemonset.FeatureSpecs()},
		{job.Descriptor(jb), jb.AddFlags, job.FeatureSpecs()},
		{cronjob.Descriptor(cj), cj.AddFlags, nil},
		{serviceaccounttoken.Descriptor(sat), sat.AddFlags, nil},
		{namespace.Descriptor(ns), ns.AddFlags, nil},
		{resourcequota.Descriptor(rq), rq.AddFlags, resourcequota.FeatureSpecs()},
		{endpoints.Descriptor(ep), ep.AddFlags, nil},
		{endpointslice.Descriptor(eps), eps.AddFlags, endpointslice.FeatureSpecs()},
		{garbagecollector.Descriptor(gcc), gcc.AddFlags, nil},
	}
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
	upGates := utilfeature.DefaultMutableFeatureGate.GetAll()
	for _, n := range natives() {
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
