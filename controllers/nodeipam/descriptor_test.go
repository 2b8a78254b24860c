package nodeipam_test

import (
	"context"
	"slices"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/nodeipam"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func allocating() nodeipam.Options {
	o := nodeipam.NewOptions()
	o.AllocateNodeCIDRs, o.ClusterCIDR = true, "10.244.0.0/16"
	return o
}

func TestDescriptor(t *testing.T) {
	d := nodeipam.Descriptor(nodeipam.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{
		Name: "node-ipam-controller", Alias: "nodeipam", EventSource: "cidrAllocator"})
	if _, sharded := d.IsSharded(); sharded {
		t.Error("sharded; every allocation reads and writes one bitmap")
	}
	if got := d.Informers(); len(got) != 1 || got[0].Resource != "nodes" {
		t.Errorf("informers %v, want nodes", got)
	}
	// The cache keeps what the controller reads of a node.
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "u"},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24", PodCIDRs: []string{"10.0.0.0/24"},
			ProviderID: "x"},
		Status: corev1.NodeStatus{Phase: corev1.NodeRunning}}
	p := controllertest.Pruned(t, d, n)[0]
	if p.Name != "a" || p.UID != "u" || p.Spec.PodCIDR != "10.0.0.0/24" ||
		!slices.Equal(p.Spec.PodCIDRs, n.Spec.PodCIDRs) || p.Spec.ProviderID != "" ||
		p.Status.Phase != "" {
		t.Errorf("the cache would hold %+v", p)
	}
}

// TestFlags: KCM's names and defaults, and parsing.
func TestFlags(t *testing.T) {
	defaults := map[string]string{
		"allocate-node-cidrs":      "false",
		"cluster-cidr":             "",
		"cidr-allocator-type":      "RangeAllocator",
		"service-cluster-ip-range": "",
		"node-cidr-mask-size":      "0",
		"node-cidr-mask-size-ipv4": "0",
		"node-cidr-mask-size-ipv6": "0",
	}
	o := nodeipam.NewOptions()
	fs := controllertest.FlagSet(o.AddFlags)
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		n++
		want, ok := defaults[f.Name]
		if !ok {
			t.Errorf("--%s: not one of KCM's flags for this controller", f.Name)
		} else if f.DefValue != want {
			t.Errorf("--%s default %q, want KCM's %q", f.Name, f.DefValue, want)
		}
	})
	if n != len(defaults) {
		t.Errorf("%d flags, want %d", n, len(defaults))
	}
	if err := fs.Parse([]string{"--allocate-node-cidrs", "--cluster-cidr=10.0.0.0/8,fd00::/48",
		"--node-cidr-mask-size-ipv4=26", "--node-cidr-mask-size-ipv6=60",
		"--service-cluster-ip-range=10.96.0.0/12,fd01::/108"}); err != nil {
		t.Fatal(err)
	}
	if !o.AllocateNodeCIDRs || o.ClusterCIDR != "10.0.0.0/8,fd00::/48" ||
		o.NodeCIDRMaskSizeIPv4 != 26 || o.NodeCIDRMaskSizeIPv6 != 60 ||
		o.ServiceClusterIPRange != "10.96.0.0/12,fd01::/108" {
		t.Errorf("parsed %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestNotStartedWithoutAllocateNodeCIDRs: with --allocate-node-cidrs
// false (the default) the InitFunc starts nothing and the host reports the
// controller not started, as KCM skips it, whatever the other flags say.
func TestNotStartedWithoutAllocateNodeCIDRs(t *testing.T) {
	o := nodeipam.NewOptions()
	o.ClusterCIDR, o.CIDRAllocatorType = "not a CIDR", "CloudAllocator" // ignored
	d := nodeipam.Descriptor(o)
	c, err := d.Init()(context.Background(), descriptor.Context{Name: d.Name()})
	if c != nil || err != nil {
		t.Errorf("Init = %v, %v; want nil, nil", c, err)
	}
	controllertest.CheckBuild(t, d)
	h := managertest.New(t, "test", []descriptor.Descriptor{d}).Start()
	h.WaitFor(nodeipam.Name, manager.PhaseNotStarted)
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestBuildRefusesBadFlags: with --allocate-node-cidrs the host refuses to
// build over a bad flag, naming it.
func TestBuildRefusesBadFlags(t *testing.T) {
	o := allocating()
	o.CIDRAllocatorType = "CloudAllocator"
	controllertest.CheckBuild(t, nodeipam.Descriptor(o), "--cidr-allocator-type")
	o = allocating()
	o.ClusterCIDR = ""
	controllertest.CheckBuild(t, nodeipam.Descriptor(o), "--cluster-cidr: required")
	controllertest.CheckBuild(t, nodeipam.Descriptor(allocating()))
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, nodeipam.Descriptor(allocating()))
}

// TestManagerAllocates: under a Manager a node gets a pod CIDR, and an
// exhausted range gives a CIDRNotAvailable event on the node.
func TestManagerAllocates(t *testing.T) {
	o := allocating()
	o.ClusterCIDR = "10.244.0.0/24"
	h := managertest.New(t, "test", []descriptor.Descriptor{nodeipam.Descriptor(o)},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}).Start()
	var got []string
	managertest.Eventually(t, "one node with the only CIDR, an event on the other", func() bool {
		got = nil
		for _, name := range []string{"a", "b"} {
			n, err := h.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, n.Spec.PodCIDRs...)
		}
		evs, err := h.Client.CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return slices.Equal(got, []string{"10.244.0.0/24"}) &&
			slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
				return e.Reason == nodeipam.ReasonCIDRNotAvailable &&
					e.InvolvedObject.Kind == "Node" && e.Source.Component == "cidrAllocator"
			})
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
