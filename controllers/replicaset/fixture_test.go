package replicaset

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// epoch is the fake clocks' start.
var epoch = controllertest.Epoch

// fixture is a controller over a fake clientset whose informers are never
// started: tests put objects into the indexers, as a watch would, and call
// sync directly.
type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	c        *controller
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock

	mu       sync.Mutex
	requeues map[string]time.Duration
}

type fixtureKind int

const (
	kindRS fixtureKind = iota
	kindRC
)

// newFixture returns a fixture whose API server and caches hold objs.
func newFixture(t *testing.T, k fixtureKind, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	generateNames(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	var kd kind
	switch k {
	case kindRS:
		kd = rsKind{client: client, inf: factory.Apps().V1().ReplicaSets()}
	case kindRC:
		kd = rcKind{client: client, inf: factory.Core().V1().ReplicationControllers()}
	}
	f := &fixture{
		t:        t,
		client:   client,
		factory:  factory,
		recorder: record.NewFakeRecorder(2000),
		clock:    clocktesting.NewFakeClock(epoch),
		requeues: map[string]time.Duration{},
	}
	c, err := newController(config{
		name:                "test-controller",
		kind:                kd,
		client:              client,
		pods:                factory.Core().V1().Pods(),
		recorder:            f.recorder,
		workers:             1,
		burst:               burstReplicas,
		clock:               f.clock,
		terminatingReplicas: true,
		deletionCost:        true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.loop.ShutDown)
	c.enqueueAfter = func(key string, d time.Duration) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requeues[key] = d
	}
	f.c = c
	for _, o := range objs {
		f.cache(o)
	}
	return f
}

// cache puts o into its informer's store, as a watch event would, with
// only the fields the controller declares it reads.
func (f *fixture) cache(o runtime.Object) {
	f.t.Helper()
	controllertest.CacheAs(f.t, Descriptor(Options{}), f.factory, o)
}

// sync runs one sync of key.
func (f *fixture) sync(key string) error {
	f.t.Helper()
	return f.c.sync(f.t.Context(), key)
}

// actions returns the recorded client actions as "verb resource[/sub]".
func (f *fixture) actions() []string { return controllertest.Actions(f.client) }

func (f *fixture) count(action string) int {
	n := 0
	for _, a := range f.actions() {
		if a == action {
			n++
		}
	}
	return n
}

// deleted returns the names of the pods deleted, sorted.
func (f *fixture) deleted() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok && d.GetResource().Resource == "pods" {
			out = append(out, d.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// createdPods returns the pods created through the client.
func (f *fixture) createdPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, a := range f.client.Actions() {
		if c, ok := a.(clienttesting.CreateAction); ok && c.GetResource().Resource == "pods" {
			out = append(out, c.GetObject().(*corev1.Pod))
		}
	}
	return out
}

// events drains the recorder.
func (f *fixture) events() []string {
	return controllertest.Events(f.recorder)
}

func (f *fixture) requeue(key string) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.requeues[key]
	return d, ok
}

func (f *fixture) rsStatus(name string) appsv1.ReplicaSetStatus {
	f.t.Helper()
	rs, err := f.client.AppsV1().ReplicaSets("ns").Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return rs.Status
}

// apiPods lists the pods the fake API server holds.
func (f *fixture) apiPods() []corev1.Pod {
	f.t.Helper()
	l, err := f.client.CoreV1().Pods("ns").List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return l.Items
}

// generateNames makes the fake API server name pods from generateName, as a
// real one does.
func generateNames(cs *fake.Clientset) {
	var n atomic.Int64
	cs.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if p, ok := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod); ok && p.Name == "" &&
			p.GenerateName != "" {
			id := n.Add(1)
			p.Name = fmt.Sprintf("%s%05d", p.GenerateName, id)
			p.UID = types.UID(fmt.Sprintf("generated-%d", id))
		}
		return false, nil, nil
	})
}

var webLabels = map[string]string{"app": "web"}

func newRS(name string, replicas int32, mods ...func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:  "ns",
			Name:       name,
			UID:        types.UID("uid-" + name),
			Generation: 1,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: webLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: map[string]string{"app": "web", "tier": "front"},
				},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "img"}},
				},
			},
		},
	}
	for _, m := range mods {
		m(rs)
	}
	return rs
}

func newRC(
	name string,
	replicas int32,
	mods ...func(*corev1.ReplicationController),
) *corev1.ReplicationController {
	rc := &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:  "ns",
			Name:       name,
			UID:        types.UID("uid-" + name),
			Generation: 1,
		},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: ptr.To(replicas),
			Selector: webLabels,
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "img"}},
				},
			},
		},
	}
	for _, m := range mods {
		m(rc)
	}
	return rc
}

// newPod returns a pending pod labelled app=web, controlled by owner (a
// ReplicaSet or ReplicationController) unless owner is nil.
func newPod(name string, owner metav1.Object, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels:            map[string]string{"app": "web", "tier": "front"},
			CreationTimestamp: metav1.NewTime(epoch.Add(-time.Hour)),
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	switch o := owner.(type) {
	case *appsv1.ReplicaSet:
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(o, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
	case *corev1.ReplicationController:
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(o, corev1.SchemeGroupVersion.WithKind("ReplicationController"))}
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

// readySince makes a pod running and ready since t.
func readySince(t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Spec.NodeName = "node-1"
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t),
		})
	}
}

func withLabels(l map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Labels = l }
}

func terminatingPod(p *corev1.Pod) {
	ts := metav1.NewTime(epoch)
	p.DeletionTimestamp = &ts
}
