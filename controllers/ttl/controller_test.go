package ttl

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// TestTableIsKCMs: the bands, as KCM v1.37's ttl controller has them.
func TestTableIsKCMs(t *testing.T) {
	want := []step{{0, 100, 0}, {90, 500, 15}, {450, 1000, 30}, {900, 2000, 60},
		{1800, 1<<31 - 1, 300}}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Errorf("steps = %v, want %v", steps, want)
	}
}

// TestBands walks the count up and down through every edge, one node per
// event as the informer delivers them, and checks the TTL at each stop.
func TestBands(t *testing.T) {
	type stop struct {
		nodes int // walk to this count, adding or deleting one at a time
		want  int // the TTL there
	}
	tests := []struct {
		name  string
		stops []stop
	}{
		{"up through every edge", []stop{
			{1, 0}, {100, 0}, {101, 15}, {500, 15}, {501, 30}, {1000, 30}, {1001, 60},
			{2000, 60}, {2001, 300}, {5000, 300}}},
		{"down through every edge", []stop{
			{2001, 300}, {1800, 300}, {1799, 60}, {900, 60}, {899, 30}, {450, 30},
			{449, 15}, {90, 15}, {89, 0}, {0, 0}}},
		{"wavering at the 100 edge: the band holds", []stop{
			{101, 15}, {95, 15}, {100, 15}, {90, 15}, {101, 15}, {89, 0}, {100, 0},
			{95, 0}, {101, 15}}},
		{"wavering at the 500 edge", []stop{
			{501, 30}, {450, 30}, {500, 30}, {449, 15}, {500, 15}, {501, 30}}},
		{"wavering at the 1000 edge", []stop{
			{1001, 60}, {900, 60}, {1000, 60}, {899, 30}, {1000, 30}, {1001, 60}}},
		{"wavering at the 2000 edge", []stop{
			{2001, 300}, {1800, 300}, {2000, 300}, {1799, 60}, {2000, 60}, {2001, 300}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s size
			for _, st := range tt.stops {
				for s.nodes < st.nodes {
					s.added()
				}
				for s.nodes > st.nodes {
					s.deleted()
				}
				if got := s.ttlSeconds(); got != st.want {
					t.Errorf("at %d nodes: TTL %d, want %d", st.nodes, got, st.want)
				}
			}
		})
	}
}

// TestBandsStayInTheTable: more deletes than adds (a delete the informer
// reports of a node it never listed) and more adds than the top band's
// edge leave the band in the table.
func TestBandsStayInTheTable(t *testing.T) {
	var s size
	s.deleted()
	s.deleted()
	if got := s.ttlSeconds(); got != 0 || s.step != 0 {
		t.Errorf("after two deletes from empty: step %d, TTL %d; want 0, 0", s.step, got)
	}
	s = size{nodes: 1<<31 - 1, step: len(steps) - 1}
	s.added()
	if got := s.ttlSeconds(); got != 300 || s.step != len(steps)-1 {
		t.Errorf("past the top: step %d, TTL %d; want %d, 300", s.step, got, len(steps)-1)
	}
}

func node(name string, annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:   corev1.NodeSpec{PodCIDR: "10.0.0.0/24"},
		Status: corev1.NodeStatus{Phase: corev1.NodeRunning}}
}

// newTestController is a controller over client whose cache holds nodes
// as the host would (metadata only), sized to n nodes.
func newTestController(t *testing.T, client *fake.Clientset, n int,
	nodes ...*corev1.Node) *controller {
	t.Helper()
	c := &controller{client: client, nodes: corelisters.NewNodeLister(
		controllertest.ClusterIndexer(t, controllertest.Pruned(t, Descriptor(NewOptions()),
			nodes...)...))}
	for range n {
		c.size.added()
	}
	return c
}

func TestSync(t *testing.T) {
	other := map[string]string{"example.com/keep": "yes"}
	with := func(v string) map[string]string {
		return map[string]string{"example.com/keep": "yes", Annotation: v}
	}
	tests := []struct {
		name  string
		nodes int               // the cluster size
		annot map[string]string // the node's annotations
		want  string            // the TTL written; "": nothing written
	}{
		{"no annotations, small cluster: 0", 1, nil, "0"},
		{"no TTL, 101 nodes: 15", 101, other, "15"},
		{"the band's TTL: nothing", 101, with("15"), ""},
		{"another band's TTL: replaced", 101, with("0"), "15"},
		{"shrunk below the band: replaced", 0, with("15"), "0"},
		{"not a number: replaced", 1, with("soon"), "0"},
		{"empty: replaced", 1, with(""), "0"},
		{"a leading zero reads as the number", 101, with("015"), ""},
		{"a plus sign reads as the number", 101, with("+15"), ""},
		{"spaces are not a number", 101, with(" 15"), "15"},
		{"501 nodes: 30", 501, nil, "30"},
		{"1001 nodes: 60", 1001, nil, "60"},
		{"2001 nodes: 300", 2001, with("60"), "300"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := node("n", tt.annot)
			client := fake.NewClientset(n.DeepCopy())
			client.ClearActions()
			c := newTestController(t, client, tt.nodes, n)
			if err := c.sync(controllertest.LogContext(t), "n"); err != nil {
				t.Fatal(err)
			}
			acts := client.Actions()
			if tt.want == "" {
				if len(acts) != 0 {
					t.Fatalf("wrote %v, want nothing", controllertest.Actions(client))
				}
				return
			}
			if len(acts) != 1 {
				t.Fatalf("actions %v, want one patch", controllertest.Actions(client))
			}
			p, ok := acts[0].(k8stesting.PatchAction)
			if !ok || p.GetPatchType() != types.StrategicMergePatchType || p.GetName() != "n" {
				t.Fatalf("action %v, want a strategic-merge patch of node n", acts[0])
			}
			wantPatch := `{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"` +
				tt.want + `"}}}`
			if string(p.GetPatch()) != wantPatch {
				t.Errorf("patch %s, want %s", p.GetPatch(), wantPatch)
			}
			got, err := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"),
				"", "n")
			if err != nil {
				t.Fatal(err)
			}
			g := got.(*corev1.Node)
			if g.Annotations[Annotation] != tt.want || g.Spec.PodCIDR != n.Spec.PodCIDR ||
				g.Status.Phase != corev1.NodeRunning {
				t.Errorf("node after the patch: %+v", g)
			}
			for k, v := range tt.annot {
				if k != Annotation && g.Annotations[k] != v {
					t.Errorf("annotation %s lost", k)
				}
			}
		})
	}
}

func TestSyncGoneNode(t *testing.T) {
	client := fake.NewClientset()
	c := newTestController(t, client, 3)
	if err := c.sync(t.Context(), "gone"); err != nil {
		t.Errorf("sync of a gone node = %v, want nil", err)
	}
	if len(client.Actions()) != 0 {
		t.Errorf("wrote %v for a gone node", controllertest.Actions(client))
	}
}

// TestSyncPatchFails: the error names the node and the TTL, for a retry.
func TestSyncPatchFails(t *testing.T) {
	n := node("n", nil)
	client := fake.NewClientset(n.DeepCopy())
	boom := errors.New("boom")
	client.PrependReactor("patch", "nodes",
		func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, boom })
	c := newTestController(t, client, 101, n)
	err := c.sync(t.Context(), "n")
	if !errors.Is(err, boom) {
		t.Fatalf("sync = %v, want the patch's error", err)
	}
	if want := "setting the TTL annotation of node n to 15: boom"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestHandlers: an add counts and queues, an update queues, a delete (a
// tombstone too) counts down and queues nothing, anything else is ignored.
func TestHandlers(t *testing.T) {
	c := &controller{loop: workloop.New("ttl-test", nil, workloop.Options{})}
	defer c.loop.ShutDown()
	check := func(what string, nodes, queued int) {
		t.Helper()
		if c.size.nodes != nodes || c.loop.Len() != queued {
			t.Errorf("after %s: %d nodes, %d queued; want %d, %d",
				what, c.size.nodes, c.loop.Len(), nodes, queued)
		}
	}
	c.nodeAdded(node("a", nil))
	check("an add", 1, 1)
	c.nodeAdded(node("b", nil))
	check("a second add", 2, 2)
	c.nodeUpdated(node("a", nil))
	check("an update of a queued node", 2, 2)
	c.nodeDeleted(node("b", nil))
	check("a delete", 1, 2)
	c.nodeDeleted(cache.DeletedFinalStateUnknown{Key: "a", Obj: node("a", nil)})
	check("a tombstone", 0, 2)
	c.nodeAdded(&corev1.Pod{})
	c.nodeUpdated("not a node")
	c.nodeDeleted(cache.DeletedFinalStateUnknown{Key: "x", Obj: &corev1.Pod{}})
	check("objects that are not nodes", 0, 2)
}

// TestAddCountsBeforeQueueing: the node that takes the cluster past an
// edge is synced with the new band.
func TestAddCountsBeforeQueueing(t *testing.T) {
	nodes := make([]*corev1.Node, 0, 101)
	for i := range 101 {
		nodes = append(nodes, node(fmt.Sprintf("n%03d", i), nil))
	}
	client := fake.NewClientset()
	c := newTestController(t, client, 100, nodes...)
	c.loop = workloop.New("ttl-test", c.sync, workloop.Options{})
	defer c.loop.ShutDown()
	if err := client.Tracker().Add(nodes[100]); err != nil {
		t.Fatal(err)
	}
	c.nodeAdded(nodes[100])
	if n := c.loop.Len(); n != 1 {
		t.Fatalf("%d queued, want 1", n)
	}
	if err := c.sync(t.Context(), nodes[100].Name); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Nodes().Get(t.Context(), nodes[100].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[Annotation] != "15" {
		t.Errorf("the 101st node's TTL %q, want 15", got.Annotations[Annotation])
	}
}
