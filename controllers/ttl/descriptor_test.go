package ttl_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/ttl"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

var nodesGVR = corev1.SchemeGroupVersion.WithResource("nodes")

func TestDescriptor(t *testing.T) {
	d := ttl.Descriptor(ttl.NewOptions())
	controllertest.CheckIdentity(t, d,
		controllertest.Identity{Name: "ttl-controller", Alias: "ttl"})
	o := ttl.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
	if _, sharded := d.IsSharded(); sharded {
		t.Error("sharded; the TTL depends on the size of the whole cluster")
	}
	if got := d.Informers(); len(got) != 1 || got[0] != nodesGVR {
		t.Errorf("informers %v, want nodes", got)
	}
	if reads, ok := d.Reads()[nodesGVR]; !ok || len(reads) != 0 {
		t.Errorf("reads of nodes %q (declared: %v), want metadata only", reads, ok)
	}
	if ttl.Annotation != "node.alpha.kubernetes.io/ttl" {
		t.Errorf("Annotation %q", ttl.Annotation)
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, ttl.Descriptor(ttl.NewOptions()))
}

func testNode(i int) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%03d", i)}}
}

// TestManagerFollowsTheClusterSize: under a Manager, 100 nodes get 0s; the
// 101st gets 15s at once, the others at their next update; down to 95 the
// band holds, and at 89 a node's next update takes it back to 0s.
func TestManagerFollowsTheClusterSize(t *testing.T) {
	objs := make([]runtime.Object, 0, 100)
	for i := range 100 {
		objs = append(objs, testNode(i))
	}
	h := managertest.New(t, "test", []descriptor.Descriptor{ttl.Descriptor(ttl.NewOptions())},
		objs...).Start()
	nodes := h.Client.CoreV1().Nodes()
	ttlOf := func(i int) string {
		n, err := nodes.Get(t.Context(), testNode(i).Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := n.Annotations[ttl.Annotation]
		if !ok {
			return "unset"
		}
		return v
	}
	all := func(want string, from, to int) func() bool {
		return func() bool {
			for i := from; i < to; i++ {
				if ttlOf(i) != want {
					return false
				}
			}
			return true
		}
	}
	touch := func(i int) {
		n, err := nodes.Get(t.Context(), testNode(i).Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels["touched"] = n.ResourceVersion
		if _, err := nodes.Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	controllertest.WaitFor(t, "100 nodes at 0s", all("0", 0, 100))

	if _, err := nodes.Create(t.Context(), testNode(100), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "the 101st node at 15s", all("15", 100, 101))
	// The others change at their next update, as in KCM (here the events
	// of the controller's own patches may still be queued: not checked).
	touch(0)
	controllertest.WaitFor(t, "an updated node at 15s", all("15", 0, 1))

	for i := 95; i <= 100; i++ {
		if err := nodes.Delete(t.Context(), testNode(i).Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// 95 nodes: still 15s. A new one shows the band the controller holds.
	if _, err := nodes.Create(t.Context(), testNode(200), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "a node added at 96 at 15s", all("15", 200, 201))

	for i := 88; i < 95; i++ {
		if err := nodes.Delete(t.Context(), testNode(i).Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// 89 nodes: 0s.
	touch(0)
	controllertest.WaitFor(t, "an updated node at 0s after the shrink", all("0", 0, 1))
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
