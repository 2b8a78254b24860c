package endpoints

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller maintains (as KCM's)

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// fixture is a controller over a fake clientset and indexers the test
// fills; sync is called directly.
type fixture struct {
	t         *testing.T
	client    *fake.Clientset
	pods      cache.Indexer
	services  cache.Indexer
	endpoints cache.Indexer
	c         *controller
	recorder  *record.FakeRecorder
	requeues  map[string]time.Duration
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		t:      t,
		client: fake.NewClientset(objs...),
		endpoints: controllertest.NamespacedIndexer(
			t,
			controllertest.OfType[*corev1.Endpoints](objs)...),
		recorder: record.NewFakeRecorder(100),
		requeues: map[string]time.Duration{},
	}
	// The pods as the informer holds them; the API server's stay whole.
	pods := cached(t, controllertest.OfType[*corev1.Pod](objs)...)
	f.pods = controllertest.NamespacedIndexer(t, pods...)
	f.services = controllertest.NamespacedIndexer(
		t,
		controllertest.OfType[*corev1.Service](objs)...)
	f.c = newSyncer(
		f.client,
		corelisters.NewServiceLister(f.services),
		corelisters.NewPodLister(f.pods),
		corelisters.NewEndpointsLister(f.endpoints),
		f.recorder,
		NewOptions(),
	)
	f.c.after = func(key string, d time.Duration) { f.requeues[key] = d }
	t.Cleanup(func() { f.c.podQueue.ShutDown() })
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

func (f *fixture) sync(key string) error {
	f.t.Helper()
	return f.c.sync(controllertest.LogContext(f.t), key)
}

// get returns the named Endpoints from the fake API server (nil if none).
func (f *fixture) get(name string) *corev1.Endpoints {
	f.t.Helper()
	ep, err := f.client.CoreV1().Endpoints("ns").Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return ep
}

// mirror delivers the API server's Endpoints to the cache.
func (f *fixture) mirror() {
	f.t.Helper()
	controllertest.Mirror(
		f.t,
		f.client,
		f.endpoints,
		corev1.SchemeGroupVersion.WithResource("endpoints"),
	)
	// The fake API server keeps no resource versions; a real one would
	// have given each object one.
	for _, o := range f.endpoints.List() {
		if ep := o.(*corev1.Endpoints); ep.ResourceVersion == "" {
			ep = ep.DeepCopy()
			ep.ResourceVersion = "1"
			if err := f.endpoints.Update(ep); err != nil {
				f.t.Fatal(err)
			}
		}
	}
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
