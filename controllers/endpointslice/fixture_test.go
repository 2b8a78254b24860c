package endpointslice

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// fixture is a controller over a fake clientset and indexers the test
// fills; sync is called directly. Slices the controller writes are
// mirrored into the slice indexer, as its informer would deliver them.
type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	slices   cache.Indexer
	services cache.Indexer
	pods     cache.Indexer
	c        *controller
	recorder *record.FakeRecorder

	mu       sync.Mutex
	requeues map[string]time.Duration
}

func newFixture(t *testing.T, o Options, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	var n atomic.Int64
	client.PrependReactor(
		"create",
		"endpointslices",
		func(a clienttesting.Action) (bool, runtime.Object, error) {
			if s, ok := a.(clienttesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice); ok &&
				s.Name == "" {
				s.Name = fmt.Sprintf("%s%05d", s.GenerateName, n.Add(1))
			}
			return false, nil, nil
		},
	)
	f := &fixture{
		t:      t,
		client: client,
		services: controllertest.NamespacedIndexer(
			t,
			controllertest.OfType[*corev1.Service](objs)...),
		slices: controllertest.NamespacedIndexer(
			t,
			controllertest.OfType[*discoveryv1.EndpointSlice](objs)...),
		recorder: record.NewFakeRecorder(100),
		requeues: map[string]time.Duration{},
	}
	// The pods as the informer holds them; the API server's stay whole.
	pods := cached(t, controllertest.OfType[*corev1.Pod](objs)...)
	f.pods = controllertest.NamespacedIndexer(t, pods...)
	nodes := controllertest.ClusterIndexer(t, controllertest.OfType[*corev1.Node](objs)...)
	f.c = newSyncer(
		client,
		corelisters.NewServiceLister(f.services),
		corelisters.NewPodLister(f.pods),
		discoverylisters.NewEndpointSliceLister(
			f.slices,
		),
		corelisters.NewNodeLister(nodes),
		f.recorder,
		o.withDefaults(),
		true,
	)
	f.c.after = func(key string, d time.Duration) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requeues[key] = d
	}
	t.Cleanup(f.c.podQueue.ShutDown)
	return f
}

// cached returns pods as the host's pods informer holds them: with only
// the fields the controller declares it reads (servicepods.PodReads).
func cached(t testing.TB, pods ...*corev1.Pod) []*corev1.Pod {
	t.Helper()
	return controllertest.Pruned(t, Descriptor(NewOptions()), pods...)
}

// podChanged feeds a pod event to the pod queue, with its pods as the
// informer would hand them over (cached), and processes it.
func (f *fixture) podChanged(old, obj any) {
	f.t.Helper()
	d := Descriptor(NewOptions())
	f.c.podQueue.PodChanged(controllertest.PrunedEvent(f.t, d, old),
		controllertest.PrunedEvent(f.t, d, obj))
	for f.c.podQueue.Len() > 0 {
		f.c.podQueue.ProcessNext(logr.Discard())
	}
}

// mirror delivers the API server's slices to the slice cache, as the
// informer would.
func (f *fixture) mirror() {
	f.t.Helper()
	controllertest.Mirror(
		f.t,
		f.client,
		f.slices,
		discoveryv1.SchemeGroupVersion.WithResource("endpointslices"),
	)
}

// sync runs one sync of key.
func (f *fixture) sync(key string) error {
	f.t.Helper()
	return f.c.sync(controllertest.LogContext(f.t), key)
}

// written returns the slices in the fake API server.
func (f *fixture) written() []discoveryv1.EndpointSlice {
	f.t.Helper()
	l, err := f.client.DiscoveryV1().EndpointSlices("").List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return l.Items
}

var webLabels = map[string]string{"app": "web"}

func newService(name string, mods ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         "ns",
			Name:              name,
			UID:               types.UID("uid-" + name),
			Labels:            map[string]string{"team": "a"},
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		},
		Spec: corev1.ServiceSpec{
			Selector:   webLabels,
			ClusterIP:  "10.96.0.10",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{
				{
					Name:       "http",
					Port:       80,
					TargetPort: intstr.FromString("http"),
					Protocol:   corev1.ProtocolTCP,
				},
			},
		},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

// newPod is a running pod on node-1 with container port "http" = port.
func newPod(name, ip string, ready bool, port int32, mods ...func(*corev1.Pod)) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns",
			Name:      name,
			UID:       types.UID("uid-" + name),
			Labels:    webLabels,
		},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c",
			Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP},
			}}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func newNode(name, zone string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{corev1.LabelTopologyZone: zone},
		},
	}
}

func testLogger(t *testing.T) logr.Logger {
	if t == nil {
		return logr.Discard()
	}
	return testr.New(t)
}
