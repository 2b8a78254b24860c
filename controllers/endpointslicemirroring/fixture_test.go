package endpointslicemirroring

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller mirrors (as KCM's)

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

var slicesGVR = discoveryv1.SchemeGroupVersion.WithResource("endpointslices")

// fixture is a controller over a fake clientset and indexers the test
// fills; sync is called directly. The fake API server gives created slices
// a name, a UID and generation 1, and bumps the generation on update, as
// the API server does; mirror delivers its slices to the slice cache.
type fixture struct {
	t         *testing.T
	client    *fake.Clientset
	endpoints cache.Indexer
	services  cache.Indexer
	slices    cache.Indexer
	recorder  *record.FakeRecorder
	requeues  controllertest.Requeues
	c         *controller
}

func newFixture(t *testing.T, o Options, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	var n atomic.Int64
	client.PrependReactor("create", "endpointslices", func(a clienttesting.Action) (bool,
		runtime.Object, error) {
		s := a.(clienttesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice)
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s%05d", s.GenerateName, n.Add(1))
		}
		s.UID = types.UID("uid-" + s.Name)
		s.Generation = 1
		return false, nil, nil
	})
	client.PrependReactor("update", "endpointslices", func(a clienttesting.Action) (bool,
		runtime.Object, error) {
		s := a.(clienttesting.UpdateAction).GetObject().(*discoveryv1.EndpointSlice)
		old, err := client.Tracker().Get(slicesGVR, s.Namespace, s.Name)
		if err != nil {
			return true, nil, err
		}
		prev := old.(*discoveryv1.EndpointSlice)
		s.UID, s.Generation = prev.UID, prev.Generation+1
		return false, nil, nil
	})
	// Objects the API server holds are cached as the host's informers
	// would hold them (Services pruned to what the controller reads).
	d := Descriptor(NewOptions())
	f := &fixture{
		t:      t,
		client: client,
		endpoints: controllertest.NamespacedIndexer(t,
			controllertest.OfType[*corev1.Endpoints](objs)...),
		services: controllertest.NamespacedIndexer(t,
			controllertest.Pruned(t, d, controllertest.OfType[*corev1.Service](objs)...)...),
		slices: controllertest.NamespacedIndexer(t,
			controllertest.OfType[*discoveryv1.EndpointSlice](objs)...),
		recorder: record.NewFakeRecorder(100),
	}
	f.c = newSyncer(client, corelisters.NewEndpointsLister(f.endpoints),
		corelisters.NewServiceLister(f.services), discoverylisters.NewEndpointSliceLister(f.slices),
		f.recorder, o)
	f.c.after = f.requeues.AddAfter
	return f
}

// mirror delivers the API server's slices to the slice cache.
func (f *fixture) mirror() {
	f.t.Helper()
	controllertest.Mirror(f.t, f.client, f.slices, slicesGVR)
}

// sync runs one sync of key.
func (f *fixture) sync(key string) error {
	f.t.Helper()
	return f.c.sync(controllertest.LogContext(f.t), key)
}

// syncAndMirror syncs key, fails the test on an error, and delivers the
// slices.
func (f *fixture) syncAndMirror(key string) {
	f.t.Helper()
	if err := f.sync(key); err != nil {
		f.t.Fatalf("sync %s: %v", key, err)
	}
	f.mirror()
}

// written returns the slices in the fake API server, by name.
func (f *fixture) written() []discoveryv1.EndpointSlice {
	f.t.Helper()
	l, err := f.client.DiscoveryV1().EndpointSlices("").List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	slices.SortFunc(l.Items, func(a, b discoveryv1.EndpointSlice) int {
		return strings.Compare(a.Name, b.Name)
	})
	return l.Items
}

// writes lists the slice writes made, as "verb endpointslices".
func (f *fixture) writes() []string {
	return controllertest.Actions(f.client, "list", "watch", "get")
}

func newService(name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("svc-" + name)},
		Spec: corev1.ServiceSpec{Selector: selector, ClusterIP: "10.96.0.10",
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
}

func newEndpoints(name string, subsets ...corev1.EndpointSubset) *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("ep-" + name),
			Labels:            map[string]string{"team": "a"},
			Annotations:       map[string]string{"note": "x"},
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		Subsets: subsets,
	}
}

// addr is an address of a pod named after its IP's last part.
func addr(ip string) corev1.EndpointAddress {
	name := ip[strings.LastIndexAny(ip, ".:")+1:]
	return corev1.EndpointAddress{IP: ip, NodeName: ptr.To("node-1"),
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "pod-" + name,
			UID: types.UID("pod-" + name)}}
}

func port(name string, n int32) corev1.EndpointPort {
	return corev1.EndpointPort{Name: name, Port: n, Protocol: corev1.ProtocolTCP}
}

func sub(ready, notReady []corev1.EndpointAddress,
	ports ...corev1.EndpointPort) corev1.EndpointSubset {
	return corev1.EndpointSubset{Addresses: ready, NotReadyAddresses: notReady, Ports: ports}
}

func addrs(ips ...string) []corev1.EndpointAddress {
	var out []corev1.EndpointAddress
	for _, ip := range ips {
		out = append(out, addr(ip))
	}
	return out
}

// render is a slice's content in short: address type, ports (as written),
// and endpoints in address order as ip(+ for ready, - for not ready).
func render(s discoveryv1.EndpointSlice) string {
	var ports, eps []string
	for _, p := range s.Ports {
		ports = append(ports, fmt.Sprintf("%s=%d", ptr.Deref(p.Name, "?"), ptr.Deref(p.Port, 0)))
	}
	for _, e := range s.Endpoints {
		mark := "-"
		if ptr.Deref(e.Conditions.Ready, false) {
			mark = "+"
		}
		eps = append(eps, strings.Join(e.Addresses, ",")+mark)
	}
	slices.Sort(eps)
	return fmt.Sprintf("%s [%s] %s", s.AddressType, strings.Join(ports, ","),
		strings.Join(eps, " "))
}

// renderAll renders slices, sorted.
func renderAll(l []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range l {
		out = append(out, render(s))
	}
	slices.Sort(out)
	return out
}
