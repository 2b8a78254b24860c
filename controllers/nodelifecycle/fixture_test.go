package nodelifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
)

// epoch is the fake clock's start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fixture is a controller over a fake clientset whose caches the test
// fills from the clientset (refresh), with a fake clock.
type fixture struct {
	t        *testing.T
	c        *controller
	client   *fake.Clientset
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	nodeIdx  cache.Indexer
	leaseIdx cache.Indexer
	podIdx   cache.Indexer
}

func newFixture(t *testing.T, o Options, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{t: t, client: fake.NewClientset(objs...),
		clock: clocktesting.NewFakeClock(epoch), recorder: record.NewFakeRecorder(100)}
	f.nodeIdx = controllertest.ClusterIndexer[*corev1.Node](t)
	f.leaseIdx = controllertest.NamespacedIndexer[*coordinationv1.Lease](t)
	f.podIdx = controllertest.NamespacedIndexer[*corev1.Pod](t)
	if err := f.podIdx.AddIndexers(index.PodsByNodeIndexers()); err != nil {
		t.Fatal(err)
	}
	o.Clock = f.clock
	f.c = &controller{
		o: o, client: f.client, clock: f.clock, recorder: f.recorder, metrics: newMetrics(),
		nodes:       corelisters.NewNodeLister(f.nodeIdx),
		leases:      coordlisters.NewLeaseLister(f.leaseIdx),
		pods:        corelisters.NewPodLister(f.podIdx),
		podIndex:    f.podIdx,
		breaker:     true,
		consistency: newLeaseConsistency(nil),
		health:      newHealthMap(),
		knownNodes:  map[string]*corev1.Node{},
		zoneQueues:  map[string]*zoneQueue{},
		zoneStates:  map[string]zoneState{},
	}
	f.refresh()
	return f
}

func testOptions() Options {
	o := NewOptions()
	o.NodeMonitorPeriod = time.Second
	o.NodeMonitorGracePeriod = 10 * time.Second
	o.NodeStartupGracePeriod = 20 * time.Second
	return o
}

// refresh makes the caches hold what the clientset holds, as informers
// would once they delivered every write.
func (f *fixture) refresh() {
	f.t.Helper()
	ctx := context.Background()
	nodes, err := f.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	leases, err := f.client.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	pods, err := f.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var ns, ls, ps []any
	for i := range nodes.Items {
		ns = append(ns, &nodes.Items[i])
	}
	for i := range leases.Items {
		ls = append(ls, &leases.Items[i])
	}
	for i := range pods.Items {
		ps = append(ps, &pods.Items[i])
	}
	for _, r := range []struct {
		idx  cache.Indexer
		objs []any
	}{{f.nodeIdx, ns}, {f.leaseIdx, ls}, {f.podIdx, ps}} {
		if err := r.idx.Replace(r.objs, ""); err != nil {
			f.t.Fatal(err)
		}
	}
}

// pass runs one health pass and refreshes the caches.
func (f *fixture) pass() {
	f.t.Helper()
	if err := f.c.monitorNodeHealth(controllertest.LogContext(f.t)); err != nil {
		f.t.Fatal(err)
	}
	f.refresh()
}

// taintPass runs one NoExecute pass and refreshes the caches.
func (f *fixture) taintPass() {
	f.c.noExecuteTaintingPass(context.Background())
	f.refresh()
}

func (f *fixture) node(name string) *corev1.Node {
	f.t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

func (f *fixture) pod(ns, name string) *corev1.Pod {
	f.t.Helper()
	p, err := f.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// renew renews the named node's Lease now.
func (f *fixture) renew(name string) {
	f.t.Helper()
	ctx := context.Background()
	l, err := f.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name,
		metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: f.clock.Now()}
	if _, err := f.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, l,
		metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.refresh()
}

// readyNode is a node that posted Ready True (and the other conditions
// False) at epoch, in zone.
func readyNode(name, zone string) *corev1.Node {
	at := metav1.NewTime(epoch)
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: "Kubelet",
			LastHeartbeatTime: at, LastTransitionTime: at}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + "name",
			CreationTimestamp: at,
			Labels:            map[string]string{corev1.LabelTopologyZone: zone}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue),
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse),
			cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse),
		}},
	}
}

func lease(name string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &name,
			RenewTime: &metav1.MicroTime{Time: renewed}},
	}
}

// readyPod is a pod bound to node with Ready True.
func readyPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
}

func podReady(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}

func taintKeys(n *corev1.Node) []string {
	var out []string
	for _, t := range n.Spec.Taints {
		out = append(out, t.Key+":"+string(t.Effect))
	}
	return out
}

var (
	updateOptions = metav1.UpdateOptions{}
	errBoom       = errors.New("boom")
	coordGVR      = coordinationv1.SchemeGroupVersion.WithResource("leases")
)
