//go:build integration

package differential_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/controllers/nodeipam"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
	"github.com/ctrlhost/ctrlhost/upstream/kcm"
)

// The settings both sides allocate with: a dual-stack cluster CIDR of four
// blocks per family, the last IPv4 block a Service CIDR's; the IPv6
// Service CIDR lies outside the cluster CIDR and takes nothing.
const (
	ipamClusterCIDR = "10.200.0.0/22,fd00:200::/62"
	ipamServiceCIDR = "10.200.3.0/24"
	ipamServiceIPv6 = "fd00:201::/108"
)

// TestNodeIPAM: a dual-stack cluster CIDR. A node holding CIDRs at the
// start keeps them and its blocks are skipped, as is the Service CIDR's;
// the scenario then adds and deletes nodes one at a time, each step once
// the last one's CIDRs are written:
//   - "a", there from the start, gets the first free block of each family;
//   - "b", added, gets the next ones;
//   - "a" is deleted and "c" added: the IPv4 candidate goes past the
//     Service block and round to the one a released, while the IPv6
//     candidate takes the next, never used, block (KCM's cidrset);
//   - "d", added, finds the IPv4 range exhausted: no CIDRs, and a
//     CIDRNotAvailable event on the node.
func TestNodeIPAM(t *testing.T) {
	e := env(t)
	r := runner(t, e)
	descriptors := r.Descriptors
	r.Descriptors = func(side differential.Side) []descriptor.Descriptor {
		if side == differential.Upstream {
			return upstreamNodeIPAM(t, e.PKI().CAFile)
		}
		ds := descriptors(side)
		o := nodeipam.NewOptions()
		o.AllocateNodeCIDRs, o.ClusterCIDR = true, ipamClusterCIDR
		o.ServiceClusterIPRange = ipamServiceCIDR + "," + ipamServiceIPv6
		for i, d := range ds {
			if d.Name() == nodeipam.Name {
				ds[i] = nodeipam.Descriptor(o)
			}
		}
		return ds
	}
	name := func(ns, n string) string { return ns + "-" + n }
	newNode := func(ns, n string, cidrs ...string) *corev1.Node {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name(ns, n),
			Labels: map[string]string{"differential": ns}}}
		if len(cidrs) > 0 {
			node.Spec.PodCIDR, node.Spec.PodCIDRs = cidrs[0], cidrs
		}
		return node
	}
	mine := func(ns string) metav1.ListOptions {
		return metav1.ListOptions{LabelSelector: "differential=" + ns}
	}
	sc := differential.Scenario{
		Name:       "node-ipam allocates, releases and runs out",
		Controller: nodeipam.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			// Both sides' allocators take every node of the cluster: any
			// other would take blocks on one side and hold them on the next.
			all, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(all.Items) > 0 {
				return fmt.Errorf("%d nodes are left from elsewhere (%s, …); the scenario "+
					"needs a cluster without nodes", len(all.Items), all.Items[0].Name)
			}
			for _, n := range []*corev1.Node{
				newNode(ns, "pre", "10.200.1.0/24", "fd00:200:0:1::/64"), newNode(ns, "a"),
			} {
				if _, err := cs.CoreV1().Nodes().Create(ctx, n,
					metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		},
		// One step per poll, each once the previous one's CIDRs are written.
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			l, err := cs.CoreV1().Nodes().List(ctx, mine(ns))
			if err != nil {
				return err
			}
			has := map[string]bool{}   // exists
			cidrs := map[string]bool{} // has its CIDRs
			for _, n := range l.Items {
				short := strings.TrimPrefix(n.Name, ns+"-")
				has[short] = true
				cidrs[short] = len(n.Spec.PodCIDRs) > 0
			}
			create := func(n string) error {
				_, err := cs.CoreV1().Nodes().Create(ctx, newNode(ns, n), metav1.CreateOptions{})
				return err
			}
			switch {
			case !has["b"] && cidrs["a"]:
				return create("b")
			case has["a"] && !has["c"] && cidrs["b"]:
				err := cs.CoreV1().Nodes().Delete(ctx, name(ns, "a"), metav1.DeleteOptions{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			case !has["a"] && has["b"] && !has["c"]:
				return create("c")
			case !has["d"] && cidrs["c"]:
				return create("d")
			}
			return nil
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			l, err := cs.CoreV1().Nodes().List(ctx, mine(ns))
			if err != nil {
				return nil, err
			}
			for i := range l.Items {
				l.Items[i].Kind = "Node"
			}
			out := objects(l.Items, func(n *corev1.Node) runtime.Object { return n })
			evs, err := nodeEvents(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			return append(out, evs), nil
		},
		Settled: func(state []map[string]any) bool {
			return count(state, "Node") == 4 && strings.Contains(differential.EventsOf(state),
				"<ns>-d Normal CIDRNotAvailable")
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{},
				mine(ns)); err != nil {
				return err
			}
			evs, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(ctx,
				metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"})
			if err != nil {
				return err
			}
			for _, ev := range evs.Items {
				if !strings.HasPrefix(ev.InvolvedObject.Name, ns+"-") {
					continue
				}
				if err := cs.CoreV1().Events(ev.Namespace).Delete(ctx, ev.Name,
					metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			return nil
		},
	}
	start := time.Now()
	res, err := r.Run(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: both sides settled in %v", sc.Name, time.Since(start).Round(time.Millisecond))
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
	// Both sides agreeing is not enough: check they did what KCM's
	// cidrset does.
	want := map[string][]string{
		"<ns>-pre": {"10.200.1.0/24", "fd00:200:0:1::/64"},
		"<ns>-b":   {"10.200.2.0/24", "fd00:200:0:2::/64"},
		"<ns>-c":   {"10.200.0.0/24", "fd00:200:0:3::/64"},
		"<ns>-d":   nil,
	}
	for _, o := range res.Native {
		if o["kind"] != "Node" {
			continue
		}
		md, _ := o["metadata"].(map[string]any)
		n, _ := md["name"].(string)
		spec, _ := o["spec"].(map[string]any)
		raw, _ := spec["podCIDRs"].([]any)
		var got []string
		for _, c := range raw {
			got = append(got, fmt.Sprint(c))
		}
		if w, ok := want[n]; !ok || !slices.Equal(got, w) {
			t.Errorf("node %s has podCIDRs %v, want %v", n, got, w)
		}
	}
}

// nodeEvents summarises the events on ns's nodes (recorded in the default
// namespace, nodes being cluster-scoped) as "Node <name> <reason>" lines.
func nodeEvents(ctx context.Context, cs kubernetes.Interface, ns string) (runtime.Object, error) {
	evs, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(ctx,
		metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"})
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, ev := range evs.Items {
		if strings.HasPrefix(ev.InvolvedObject.Name, ns+"-") {
			lines = append(lines, fmt.Sprintf("Node %s %s %s %s (%s)", ev.InvolvedObject.Name,
				ev.Type, ev.Reason, ev.Message, ev.Source.Component))
		}
	}
	slices.Sort(lines)
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{Kind: "EventSummary"},
		ObjectMeta: metav1.ObjectMeta{Name: "events"},
		Data:       map[string]string{"reasons": strings.Join(slices.Compact(lines), "\n")},
	}, nil
}

// upstreamNodeIPAM returns KCM's descriptors with KCM's node-ipam settings
// for the scenario, as its flags would set them.
func upstreamNodeIPAM(t *testing.T, caFile string) []descriptor.Descriptor {
	o, err := kcm.NewOptions()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config(manager.NewOptions())
	if err != nil {
		t.Fatal(err)
	}
	cfg.SAController.RootCAFile = caFile
	cfg.KubeCloudShared.AllocateNodeCIDRs = true
	cfg.KubeCloudShared.ClusterCIDR = ipamClusterCIDR
	cfg.KubeCloudShared.CIDRAllocatorType = nodeipam.RangeAllocator // the flag's default
	cfg.NodeIPAMController.ServiceCIDR = ipamServiceCIDR
	cfg.NodeIPAMController.SecondaryServiceCIDR = ipamServiceIPv6
	ds, err := kcm.Descriptors(kcm.Config{Component: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestNodeIPAMOff: with --allocate-node-cidrs false (both sides'
// default) neither side starts the controller: a node keeps no CIDRs and
// gets no event.
func TestNodeIPAMOff(t *testing.T) {
	mine := func(ns string) metav1.ListOptions {
		return metav1.ListOptions{LabelSelector: "differential=" + ns}
	}
	compare(t, differential.Scenario{
		Name:       "node-ipam does not start without --allocate-node-cidrs",
		Controller: nodeipam.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: ns + "-a", Labels: map[string]string{"differential": ns}}},
				metav1.CreateOptions{})
			return err
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			l, err := cs.CoreV1().Nodes().List(ctx, mine(ns))
			if err != nil {
				return nil, err
			}
			for i := range l.Items {
				l.Items[i].Kind = "Node"
			}
			evs, err := nodeEvents(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			return append(objects(l.Items,
				func(n *corev1.Node) runtime.Object { return n }), evs), nil
		},
		Settled: func(state []map[string]any) bool { return count(state, "Node") == 1 },
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			return cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, mine(ns))
		},
	})
}
