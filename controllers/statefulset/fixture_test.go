package statefulset

import (
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// fixture is a controller over a fake clientset whose informers are never
// started: refresh copies the fake API server's objects into the informer
// stores (pods and claims pruned as the host caches them), and tests call sync.
type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	c        *controller
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	requeues controllertest.Requeues
}

type fixtureOption func(*config)

func withoutMaxUnavailable(c *config) { c.maxUnavailable = false }

func newFixture(t *testing.T, objs []runtime.Object, opts ...fixtureOption) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	f := &fixture{
		t:        t,
		client:   client,
		factory:  informers.NewSharedInformerFactory(client, 0),
		recorder: record.NewFakeRecorder(1000),
		clock:    clocktesting.NewFakeClock(controllertest.Epoch),
	}
	var uid int
	// The API server gives a created pod a UID and phase Pending.
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool,
		runtime.Object, error) {
		if p, ok := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod); ok {
			uid++
			p.UID = types.UID("pod-uid-" + p.Name + "-" + string(rune('a'+uid)))
			p.Status.Phase = corev1.PodPending
		}
		return false, nil, nil
	})
	cfg := config{
		name:           "test-statefulset",
		client:         client,
		sets:           f.factory.Apps().V1().StatefulSets(),
		revisions:      f.factory.Apps().V1().ControllerRevisions(),
		pods:           f.factory.Core().V1().Pods(),
		claims:         f.factory.Core().V1().PersistentVolumeClaims(),
		recorder:       f.recorder,
		workers:        1,
		clock:          f.clock,
		maxUnavailable: true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := newController(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.loop.ShutDown)
	c.enqueueAfter = f.requeues.AddAfter
	f.c = c
	f.refresh()
	return f
}

// refresh replaces every informer store's content with the fake API
// server's objects.
func (f *fixture) refresh() {
	f.t.Helper()
	for _, m := range []struct {
		inf cache.SharedIndexInformer
		gvr schema.GroupVersionResource
	}{
		{f.factory.Apps().V1().StatefulSets().Informer(),
			appsv1.SchemeGroupVersion.WithResource("statefulsets")},
		{f.factory.Apps().V1().ControllerRevisions().Informer(),
			appsv1.SchemeGroupVersion.WithResource("controllerrevisions")},
		{f.factory.Core().V1().Pods().Informer(), corev1.SchemeGroupVersion.WithResource("pods")},
		{f.factory.Core().V1().PersistentVolumeClaims().Informer(),
			corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")},
	} {
		controllertest.Mirror(f.t, f.client, m.inf.GetStore(), m.gvr)
	}
	pods := f.factory.Core().V1().Pods().Informer().GetStore()
	var pruned []any
	for _, o := range pods.List() {
		p := o.(*corev1.Pod)
		pruned = append(pruned, controllertest.Pruned(f.t, Descriptor(Options{}), p)[0])
	}
	if err := pods.Replace(pruned, ""); err != nil {
		f.t.Fatal(err)
	}
	claims := f.factory.Core().V1().PersistentVolumeClaims().Informer().GetStore()
	pruned = nil
	for _, o := range claims.List() {
		c := o.(*corev1.PersistentVolumeClaim)
		pruned = append(pruned, controllertest.Pruned(f.t, Descriptor(Options{}), c)[0])
	}
	if err := claims.Replace(pruned, ""); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) sync(name string) error {
	f.t.Helper()
	f.refresh()
	return f.c.sync(f.t.Context(), "ns/"+name)
}

func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.sync(name); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
}

// settle syncs, running pods ready in between, until a sync changes
// nothing (at most n rounds).
func (f *fixture) settle(name string, n int) {
	f.t.Helper()
	for range n {
		before := f.writes()
		f.mustSync(name)
		f.kubelet()
		if f.writes() == before {
			return
		}
	}
	f.t.Fatalf("%s did not settle in %d syncs", name, n)
}

// writes counts the actions that are not reads.
func (f *fixture) writes() int {
	n := 0
	for _, a := range f.client.Actions() {
		switch a.GetVerb() {
		case "list", "watch", "get":
		default:
			n++
		}
	}
	return n
}

// kubelet makes every pending pod running and ready since now.
func (f *fixture) kubelet() {
	f.t.Helper()
	for _, p := range f.apiPods() {
		if p.Status.Phase != corev1.PodPending {
			continue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady,
			Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(f.clock.Now())}}
		if _, err := f.client.CoreV1().Pods(p.Namespace).UpdateStatus(f.t.Context(), &p,
			metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) apiPods() []corev1.Pod {
	f.t.Helper()
	l, err := f.client.CoreV1().Pods("ns").List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

// podNames lists "<name>@<revision hash suffix>" of the API server's pods.
func (f *fixture) podNames() string {
	var out []string
	for _, p := range f.apiPods() {
		out = append(out, p.Name)
	}
	return strings.Join(out, " ")
}

func (f *fixture) claims() []corev1.PersistentVolumeClaim {
	f.t.Helper()
	l, err := f.client.CoreV1().PersistentVolumeClaims("ns").List(f.t.Context(),
		metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

func (f *fixture) set(name string) *appsv1.StatefulSet {
	f.t.Helper()
	s, err := f.client.AppsV1().StatefulSets("ns").Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) update(s *appsv1.StatefulSet) {
	f.t.Helper()
	s.Generation++
	if _, err := f.client.AppsV1().StatefulSets("ns").Update(f.t.Context(), s,
		metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) revisions() []appsv1.ControllerRevision {
	f.t.Helper()
	l, err := f.client.AppsV1().ControllerRevisions("ns").List(f.t.Context(),
		metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Revision < l.Items[j].Revision })
	return l.Items
}

// newSet is a defaulted StatefulSet of replicas pods with a "data" claim
// template.
func newSet(name string, replicas int32, mods ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			Generation: 1},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
					Image: "img"}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{
					Partition: ptr.To[int32](0)},
			},
			RevisionHistoryLimit: ptr.To[int32](10),
		},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

// advance moves the fake clock.
func (f *fixture) advance(d time.Duration) { f.clock.Step(d) }
