package kcm_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/upstream/kcm"
)

func descriptors(t *testing.T) []descriptor.Descriptor {
	t.Helper()
	o, err := kcm.NewOptions()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config(manager.NewOptions())
	if err != nil {
		t.Fatal(err)
	}
	ds, err := kcm.Descriptors(kcm.Config{Component: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestDescriptorsMatchUpstream: one descriptor per entry of upstream's
// NewControllerDescriptors, with its name, aliases, required feature
// gates and disabled-by-default flag, and only the special one start-first.
func TestDescriptorsMatchUpstream(t *testing.T) {
	up := app.NewControllerDescriptors()
	ds := descriptors(t)
	if len(ds) != len(up) {
		t.Fatalf("%d descriptors, upstream has %d", len(ds), len(up))
	}
	for _, d := range ds {
		u, ok := up[d.Name()]
		if !ok {
			t.Errorf("%s: not an upstream controller", d.Name())
			continue
		}
		if got, want := d.Aliases(), u.GetAliases(); !slices.Equal(got, want) {
			t.Errorf("%s: aliases %v, upstream %v", d.Name(), got, want)
		}
		if got, want := d.FeatureGates(), u.GetRequiredFeatureGates(); !slices.Equal(got, want) {
			t.Errorf("%s: feature gates %v, upstream %v", d.Name(), got, want)
		}
		if d.IsDisabledByDefault() != u.IsDisabledByDefault() {
			t.Errorf("%s: disabled by default %v, upstream %v", d.Name(), d.IsDisabledByDefault(), u.IsDisabledByDefault())
		}
		if d.IsStartFirst() != u.RequiresSpecialHandling() {
			t.Errorf("%s: start-first %v, upstream special handling %v", d.Name(), d.IsStartFirst(), u.RequiresSpecialHandling())
		}
		if d.IsCloudProvider() || !d.NeedsLeaderElection() {
			t.Errorf("%s: cloud=%v, leader-elected=%v; upstream: false, true", d.Name(), d.IsCloudProvider(), d.NeedsLeaderElection())
		}
	}
	if _, err := kcm.Descriptors(kcm.Config{}); err == nil || !strings.Contains(err.Error(), "Component") {
		t.Errorf("Descriptors without a configuration: %v, want an error naming Component", err)
	}
}

// TestControllersFlagSelectsWhatKCMSelects: for each --controllers value,
// the Manager runs exactly the controllers KCM v1.37 would start: those
// upstream's IsControllerEnabled accepts whose feature gates are on.
func TestControllersFlagSelectsWhatKCMSelects(t *testing.T) {
	for _, controllers := range [][]string{
		{"*"},
		{"*", "bootstrapsigner", "tokencleaner"},
		{"*", "-garbage-collector-controller", "-deployment"},
		{"deployment", "replicaset", "garbagecollector"},
		{"-job", "*", "selinux-warning-controller", "-ttl"},
		{"-serviceaccount-token-controller", "*"},
	} {
		t.Run(strings.Join(controllers, ","), func(t *testing.T) {
			want, err := kcm.UpstreamSelection(controllers)
			if err != nil {
				t.Fatal(err)
			}

			opts := manager.Options{Controllers: kcm.AlwaysOn(controllers)}
			m, err := manager.NewBuilder("kube-controller-manager").
				WithClient(fake.NewClientset(), metadatafake.NewSimpleMetadataClient(runtime.NewScheme())).
				WithOptions(opts).WithFeatureGate(utilfeature.DefaultMutableFeatureGate).
				Register(descriptors(t)...).Build()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, st := range m.Controllers() {
				if st.Phase != manager.PhaseDisabled && st.Phase != manager.PhaseSkipped {
					got = append(got, st.Name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("ctrlhost runs %v\nKCM runs     %v", got, want)
			}
		})
	}
}

// TestKCMFlagsAllPresent: every flag upstream's kube-controller-manager has
// is on the drop-in's command line (as a controller flag, a host flag, or a
// refusal), in the section KCM puts it in.
func TestKCMFlagsAllPresent(t *testing.T) {
	s, err := options.NewKubeControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	up := s.Flags(app.KnownControllers(), app.ControllersDisabledByDefault(), app.ControllerAliases())
	o, err := kcm.NewOptions()
	if err != nil {
		t.Fatal(err)
	}
	host := manager.NewOptions()
	hostFS := pflag.NewFlagSet("host", pflag.ContinueOnError)
	host.AddFlags(hostFS)
	var fss cliflag.NamedFlagSets
	o.AddFlags(&fss, hostFS)
	for _, section := range up.Order {
		up.FlagSets[section].VisitAll(func(f *pflag.Flag) {
			if fss.FlagSets[section] == nil || fss.FlagSets[section].Lookup(f.Name) == nil {
				t.Errorf("--%s: missing from section %q", f.Name, section)
			}
		})
	}
	if u := fss.FlagSets["generic"].Lookup("controllers").Usage; !strings.Contains(u, "Disabled-by-default controllers: bootstrap-signer-controller") {
		t.Errorf("--controllers help does not list the controllers as KCM's does: %q", u)
	}
	if fss.FlagSets[names.DeploymentController].Lookup("concurrent-deployment-syncs") == nil {
		t.Error("the deployment controller's section lacks --concurrent-deployment-syncs")
	}
}
