package nodeipam

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

func node(name string, cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-" + name)}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidrs[0], cidrs
	}
	return n
}

// fixture runs the controller over a fake clientset.
type fixture struct {
	t        *testing.T
	cs       *fake.Clientset
	recorder *record.FakeRecorder
	runErr   chan error
	mu       sync.Mutex
	events   []string
}

func start(t *testing.T, o Options, objs ...runtime.Object) *fixture {
	t.Helper()
	return startWith(t, o, nil, objs...)
}

// startWith is start with setup called on the clientset first (reactors).
func startWith(t *testing.T, o Options, setup func(*fake.Clientset),
	objs ...runtime.Object) *fixture {
	t.Helper()
	cs := fake.NewClientset(objs...)
	if setup != nil {
		setup(cs)
	}
	f := &fixture{t: t, cs: cs, recorder: record.NewFakeRecorder(1000), runErr: make(chan error, 1)}
	s, err := o.settings()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(controllertest.LogContext(t))
	factory := informers.NewSharedInformerFactory(cs, 0)
	c, err := newController(ctx, descriptor.Context{Name: Name,
		ClientBuilder:   controllertest.ClientBuilder(cs, nil),
		InformerFactory: factory, EventRecorder: f.recorder}, s)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	go func() { f.runErr <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-f.runErr
		factory.Shutdown()
	})
	return f
}

func (f *fixture) cidrs(name string) []string {
	n, err := f.cs.CoreV1().Nodes().Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	if len(n.Spec.PodCIDRs) > 0 && n.Spec.PodCIDR != n.Spec.PodCIDRs[0] {
		f.t.Errorf("node %s: podCIDR %s is not podCIDRs[0] %s", name, n.Spec.PodCIDR,
			n.Spec.PodCIDRs[0])
	}
	return n.Spec.PodCIDRs
}

func (f *fixture) waitCIDRs(name string, want ...string) {
	f.t.Helper()
	controllertest.WaitFor(f.t, name+" to get "+strings.Join(want, ","), func() bool {
		return slices.Equal(f.cidrs(name), want)
	})
}

func (f *fixture) add(n *corev1.Node) {
	f.t.Helper()
	if _, err := f.cs.CoreV1().Nodes().Create(f.t.Context(), n,
		metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) remove(name string) {
	f.t.Helper()
	if err := f.cs.CoreV1().Nodes().Delete(f.t.Context(), name,
		metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// waitEvent waits for an event starting with prefix.
func (f *fixture) waitEvent(prefix string) {
	f.t.Helper()
	controllertest.WaitFor(f.t, "event "+prefix, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.events = append(f.events, controllertest.Events(f.recorder)...)
		return controllertest.HasEvent(f.events, prefix)
	})
}

func options(cluster, service string) Options {
	o := NewOptions()
	o.AllocateNodeCIDRs, o.ClusterCIDR, o.ServiceClusterIPRange = true, cluster, service
	return o
}

// TestAllocates: nodes already holding CIDRs keep them and their blocks
// are skipped, as are the Service CIDR's; nodes added one after another
// get the next blocks; a deleted node's block is reused once the next
// candidate has gone round; an exhausted cluster CIDR gives the node a
// CIDRNotAvailable event until a block frees up.
func TestAllocates(t *testing.T) {
	f := start(t, options("10.0.0.0/22", "10.0.3.0/24"),
		node("pre", "10.0.1.0/24"), node("a"))
	f.waitCIDRs("a", "10.0.0.0/24")
	f.waitCIDRs("pre", "10.0.1.0/24")
	f.add(node("b"))
	f.waitCIDRs("b", "10.0.2.0/24")
	f.remove("a")
	f.add(node("c"))
	f.waitCIDRs("c", "10.0.0.0/24") // past the Service block, round to the released one
	f.add(node("d"))
	f.waitEvent("Normal CIDRNotAvailable Node d status is now: CIDRNotAvailable")
	if got := f.cidrs("d"); got != nil {
		t.Fatalf("d got %v from an exhausted range", got)
	}
	f.remove("b")
	f.waitCIDRs("d", "10.0.2.0/24") // retried with back-off
}

// TestDualStack: one block per family, in --cluster-cidr's order, each
// family's candidate moving on its own.
func TestDualStack(t *testing.T) {
	f := start(t, options("fd00:10::/62,10.0.0.0/23", "10.96.0.0/12,fd00:10::/64"),
		node("pre", "fd00:10:0:2::/64", "10.0.1.0/24"), node("a"))
	f.waitCIDRs("a", "fd00:10:0:1::/64", "10.0.0.0/24")
	f.add(node("b"))
	f.waitEvent("Normal CIDRNotAvailable Node b status is now")
	f.remove("a")
	// b's failed tries gave back the IPv6 block they took (3), and the
	// candidate went round to the one a released.
	f.waitCIDRs("b", "fd00:10:0:1::/64", "10.0.0.0/24")
}

// TestPatchFailure: the write is tried three times; then a
// CIDRAssignmentFailed event, the block is released and the node retried.
func TestPatchFailure(t *testing.T) {
	var mu sync.Mutex
	failures := 3
	f := startWith(t, options("10.0.0.0/22", ""), func(cs *fake.Clientset) {
		cs.PrependReactor("patch", "nodes", func(clienttesting.Action) (bool, runtime.Object,
			error) {
			mu.Lock()
			defer mu.Unlock()
			if failures == 0 {
				return false, nil, nil
			}
			failures--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"},
				"a", errors.New("boom"))
		})
	}, node("a"))
	f.waitEvent("Normal CIDRAssignmentFailed Node a status is now: CIDRAssignmentFailed")
	// Released after the failure: the retry takes the next candidate.
	f.waitCIDRs("a", "10.0.1.0/24")
	if n := controllertest.CountActions(f.cs, "patch", "nodes"); n != 4 {
		t.Errorf("%d patches, want 3 failed and 1 that worked", n)
	}
}

// TestSyncOccupiesNodesWithCIDRs: syncing a node that has CIDRs (set by
// someone else, after the start) takes its block; one without gets the
// next free block.
func TestSyncOccupiesNodesWithCIDRs(t *testing.T) {
	cs := fake.NewClientset(node("other", "10.0.0.0/24"), node("a"))
	s, err := options("10.0.0.0/23", "").settings()
	if err != nil {
		t.Fatal(err)
	}
	ctx := controllertest.LogContext(t)
	factory := informers.NewSharedInformerFactory(cs, 0)
	c, err := newController(ctx, descriptor.Context{Name: Name,
		ClientBuilder:   controllertest.ClientBuilder(cs, nil),
		InformerFactory: factory, EventRecorder: record.NewFakeRecorder(10)}, s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.loop.ShutDown()
	stop := make(chan struct{})
	defer factory.Shutdown()
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	for _, name := range []string{"other", "a"} {
		if err := c.sync(ctx, name); err != nil {
			t.Fatalf("sync %s: %v", name, err)
		}
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	if err != nil || !slices.Equal(n.Spec.PodCIDRs, []string{"10.0.1.0/24"}) {
		t.Fatalf("a = %v, %v; want 10.0.1.0/24", n.Spec.PodCIDRs, err)
	}
}

// TestBadNodeCIDRStopsRun: a node holding a CIDR outside the cluster CIDR
// stops the controller with an error naming it, as KCM cannot start.
func TestBadNodeCIDRStopsRun(t *testing.T) {
	for _, bad := range [][]string{{"192.168.0.0/24"}, {"garbage"},
		{"10.0.0.0/24", "fd00::/64"}} {
		t.Run(strings.Join(bad, ","), func(t *testing.T) {
			f := start(t, options("10.0.0.0/16", ""), node("odd", bad...))
			var err error
			controllertest.WaitFor(t, "Run to fail", func() bool {
				select {
				case err = <-f.runErr:
					f.runErr <- err // for the cleanup
					return true
				default:
					return false
				}
			})
			if err == nil || !strings.Contains(err.Error(), "node odd") {
				t.Errorf("Run = %v, want an error naming node odd", err)
			}
		})
	}
}
