package daemonset

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// epoch is the fake clocks' start.
var epoch = controllertest.Epoch

// fixture is a controller over a fake clientset whose informers are never
// started: refresh copies the fake API server's objects into the informer
// stores, as watches would, and tests call sync directly.
type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	c        *controller
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock

	mu       sync.Mutex
	requeues []time.Duration
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	f := &fixture{
		t:        t,
		client:   client,
		factory:  informers.NewSharedInformerFactory(client, 0),
		recorder: record.NewFakeRecorder(1000),
		clock:    clocktesting.NewFakeClock(epoch),
	}
	f.generateNames()
	c, err := newController(config{
		name:       "test-daemonset",
		client:     client,
		daemonSets: f.factory.Apps().V1().DaemonSets(),
		revisions:  f.factory.Apps().V1().ControllerRevisions(),
		pods:       f.factory.Core().V1().Pods(),
		nodes:      f.factory.Core().V1().Nodes(),
		recorder:   f.recorder,
		workers:    1,
		clock:      f.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.loop.ShutDown)
	c.enqueueAfter = func(_ string, d time.Duration) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requeues = append(f.requeues, d)
	}
	f.c = c
	f.refresh()
	return f
}

// generateNames makes the fake API server name pods from generateName and
// stamp their creation, as a real one does; later pods are newer.
func (f *fixture) generateNames() {
	var n atomic.Int64
	f.client.PrependReactor(
		"create",
		"pods",
		func(a clienttesting.Action) (bool, runtime.Object, error) {
			p, ok := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod)
			if ok && p.Name == "" && p.GenerateName != "" {
				id := n.Add(1)
				p.Name = fmt.Sprintf("%s%05d", p.GenerateName, id)
				p.UID = types.UID(fmt.Sprintf("generated-%d", id))
				p.CreationTimestamp = metav1.NewTime(
					f.clock.Now().Add(time.Duration(id) * time.Millisecond),
				)
			}
			return false, nil, nil
		},
	)
}

// refresh replaces every informer store's content with the fake API
// server's objects, the pods pruned (cached).
func (f *fixture) refresh() {
	f.t.Helper()
	for _, m := range []struct {
		inf cache.SharedIndexInformer
		gvr schema.GroupVersionResource
	}{
		{f.factory.Apps().V1().DaemonSets().Informer(), appsv1.SchemeGroupVersion.WithResource("daemonsets")},
		{f.factory.Apps().V1().ControllerRevisions().Informer(), appsv1.SchemeGroupVersion.WithResource("controllerrevisions")},
		{f.factory.Core().V1().Pods().Informer(), corev1.SchemeGroupVersion.WithResource("pods")},
		{f.factory.Core().V1().Nodes().Informer(), corev1.SchemeGroupVersion.WithResource("nodes")},
	} {
		controllertest.Mirror(f.t, f.client, m.inf.GetStore(), m.gvr)
	}
	pods := f.factory.Core().V1().Pods().Informer().GetStore()
	var pruned []any
	for _, o := range pods.List() {
		pruned = append(pruned, cached(f.t, o.(*corev1.Pod))[0])
	}
	if err := pods.Replace(pruned, ""); err != nil {
		f.t.Fatal(err)
	}
}

// cached returns copies of pods as the host's pod informer holds them for
// the controller: with only the fields it declares it reads.
func cached(t testing.TB, pods ...*corev1.Pod) []*corev1.Pod {
	t.Helper()
	return controllertest.Pruned(t, Descriptor(Options{}), pods...)
}

// sync refreshes the caches and runs one sync of ns/name.
func (f *fixture) sync(name string) error {
	f.t.Helper()
	f.refresh()
	return f.c.sync(f.t.Context(), "ns/"+name)
}

// mustSync is sync, failing the test on an error.
func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.sync(name); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
}

// kubelet binds every pod to its target node and makes it running and
// ready since now, as scheduler and kubelet would; it finishes graceful
// deletions (there are none with the fake client, which deletes at once).
func (f *fixture) kubelet() {
	f.t.Helper()
	for _, p := range f.apiPods() {
		if p.Status.Phase != corev1.PodPending && p.Status.Phase != "" {
			continue
		}
		node, err := targetNode(&p)
		if err != nil {
			f.t.Fatal(err)
		}
		p.Spec.NodeName = node
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{
			{
				Type:               corev1.PodReady,
				Status:             corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(f.clock.Now()),
			},
		}
		if _, err := f.client.CoreV1().Pods(p.Namespace).Update(f.t.Context(), &p, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
}

// apiPods lists the pods the fake API server holds, oldest first.
func (f *fixture) apiPods() []corev1.Pod {
	f.t.Helper()
	l, err := f.client.CoreV1().Pods("ns").List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

// podNodes returns "<node>" for each pod on the API server, sorted, with
// "(hash)" appended when withHash.
func (f *fixture) podNodes(withHash bool) []string {
	f.t.Helper()
	var out []string
	for _, p := range f.apiPods() {
		n, err := targetNode(&p)
		if err != nil {
			f.t.Fatal(err)
		}
		if withHash {
			n += "(" + p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] + ")"
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (f *fixture) ds(name string) *appsv1.DaemonSet {
	f.t.Helper()
	ds, err := f.client.AppsV1().DaemonSets("ns").Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return ds
}

func (f *fixture) revisions() []appsv1.ControllerRevision {
	f.t.Helper()
	l, err := f.client.AppsV1().ControllerRevisions("ns").List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Revision < l.Items[j].Revision })
	return l.Items
}

// events drains the recorder.
func (f *fixture) events() []string {
	return controllertest.Events(f.recorder)
}

func (f *fixture) countActions(verb, resource string) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == "" {
			n++
		}
	}
	return n
}

var agentLabels = map[string]string{"app": "agent"}

// newDS returns a DaemonSet of generation 1 with the API server's
// defaults for what the controller reads (RollingUpdate, maxUnavailable 1,
// history limit 10, the template-generation annotation).
func newDS(name string, mods ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Generation: 1,
			Annotations: map[string]string{appsv1.DeprecatedTemplateGeneration: "1"},
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: agentLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: agentLabels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "img:1"}},
				},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{
					MaxUnavailable: ptr.To(intstr.FromInt32(1)),
					MaxSurge:       ptr.To(intstr.FromInt32(0)),
				},
			},
			RevisionHistoryLimit: ptr.To[int32](10),
		},
	}
	for _, m := range mods {
		m(ds)
	}
	return ds
}

func newNode(name string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"kubernetes.io/hostname": name},
		},
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

func nodes(names ...string) []runtime.Object {
	var out []runtime.Object
	for _, n := range names {
		out = append(out, newNode(n))
	}
	return out
}

// changeTemplate changes ds's template on the fake API server as a user
// would, raising generation and the template-generation annotation as the
// API server does.
func (f *fixture) changeTemplate(name, image string) {
	f.t.Helper()
	ds := f.ds(name)
	ds.Spec.Template.Spec.Containers[0].Image = image
	ds.Generation++
	ds.Annotations[appsv1.DeprecatedTemplateGeneration] = fmt.Sprint(ds.Generation)
	if _, err := f.client.AppsV1().DaemonSets("ns").Update(f.t.Context(), ds, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}
