package disruption

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	fakescale "k8s.io/client-go/scale/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

const ns = "default"

var t0 = controllertest.Epoch

// widgets is a custom kind with a scale subresource, known to the
// fixture's REST mapper and discovery.
var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

type fixture struct {
	c        *controller
	client   *fake.Clientset
	scales   *fakescale.FakeScaleClient
	clock    *testingclock.FakeClock
	recorder *record.FakeRecorder
	rechecks controllertest.Requeues
	stales   controllertest.Requeues
}

// newFixture caches objs as the host would (pruned to what the
// descriptor reads) and puts them in the fake API server.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	d := Descriptor(NewOptions())
	idx := map[string]cache.Indexer{}
	for _, kind := range []string{"pdb", "pod", "rc", "rs", "deploy", "sts"} {
		idx[kind] = controllertest.NamespacedIndexer[runtime.Object](t)
	}
	for _, o := range controllertest.Pruned(t, d, objs...) {
		var k string
		switch o.(type) {
		case *policyv1.PodDisruptionBudget:
			k = "pdb"
		case *corev1.Pod:
			k = "pod"
		case *corev1.ReplicationController:
			k = "rc"
		case *appsv1.ReplicaSet:
			k = "rs"
		case *appsv1.Deployment:
			k = "deploy"
		case *appsv1.StatefulSet:
			k = "sts"
		default:
			continue
		}
		if err := idx[k].Add(o); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset(controllertest.DeepCopies(objs...)...)
	client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", Namespaced: true, Kind: "Widget"},
			{Name: "widgets/scale", Namespaced: true, Group: "autoscaling", Version: "v1",
				Kind: "Scale"},
			{Name: "gadgets", Namespaced: true, Kind: "Gadget"},
		}},
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(widgetGVK, meta.RESTScopeNamespace)
	mapper.Add(widgetGVK.GroupVersion().WithKind("Gadget"), meta.RESTScopeNamespace)
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), meta.RESTScopeNamespace)
	f := &fixture{client: client, scales: &fakescale.FakeScaleClient{},
		clock: testingclock.NewFakeClock(t0), recorder: record.NewFakeRecorder(100)}
	f.c = &controller{
		client: client, recorder: f.recorder, clock: f.clock, mapper: mapper,
		scales: f.scales, discovery: client.Discovery(), workers: 1,
		pdbs:         policylisters.NewPodDisruptionBudgetLister(idx["pdb"]),
		pods:         corelisters.NewPodLister(idx["pod"]),
		rcs:          corelisters.NewReplicationControllerLister(idx["rc"]),
		rss:          appslisters.NewReplicaSetLister(idx["rs"]),
		deployments:  appslisters.NewDeploymentLister(idx["deploy"]),
		statefulSets: appslisters.NewStatefulSetLister(idx["sts"]),
		staleTimeout: stalePodDisruptionTimeout,
		recheck:      f.rechecks.AddAfter,
		staleLater:   f.stales.AddAfter,
	}
	f.c.loop = workloop.New("test", f.c.sync, workloop.Options{Clock: f.clock})
	f.c.stale = workloop.New("test-stale", f.c.syncStalePod, workloop.Options{Clock: f.clock})
	t.Cleanup(func() { f.c.loop.ShutDown(); f.c.stale.ShutDown() })
	client.ClearActions()
	return f
}

// statuses returns the budget statuses written, in order.
func (f *fixture) statuses() []policyv1.PodDisruptionBudgetStatus {
	var out []policyv1.PodDisruptionBudgetStatus
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			if u, ok := a.(interface{ GetObject() runtime.Object }); ok {
				out = append(out, u.GetObject().(*policyv1.PodDisruptionBudget).Status)
			}
		}
	}
	return out
}

func (f *fixture) events() []string { return controllertest.Events(f.recorder) }

// Object builders.

var labels = map[string]string{"app": "web"}

func budget(min, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pdb", Generation: 1, UID: "pdb-uid"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: min, MaxUnavailable: maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
}

func intOr(n int) *intstr.IntOrString { return ptr.To(intstr.FromInt(n)) }

func pct(s string) *intstr.IntOrString { return ptr.To(intstr.FromString(s)) }

type podOpt func(*corev1.Pod)

func newPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Generation: 3,
			UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{
			{Name: "c", Image: "pause"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func notReady(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }

func deleting(p *corev1.Pod) {
	now := metav1.NewTime(t0)
	p.DeletionTimestamp = &now
}

func ownedBy(apiVersion, kind, name string, uid types.UID) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind,
			Name: name, UID: uid, Controller: ptr.To(true)}}
	}
}

func replicaSet(name string, replicas int32, owner *metav1.OwnerReference) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		UID: types.UID("uid-" + name)}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)}}
	if owner != nil {
		rs.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return rs
}

func deployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		UID: types.UID("uid-" + name)}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}}
}

func statefulSet(name string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		UID: types.UID("uid-" + name)}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)}}
}

func replicationController(name string, replicas int32) *corev1.ReplicationController {
	return &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		UID: types.UID("uid-" + name)},
		Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To(replicas)}}
}

func at(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

func typesUID(s string) types.UID { return types.UID(s) }
