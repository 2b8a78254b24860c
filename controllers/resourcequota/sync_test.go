package resourcequota

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// fixture is a controller over a fake clientset and indexers the test
// fills (no informer runs): tests call sync and the handlers directly.
type fixture struct {
	t      *testing.T
	client *fake.Clientset
	c      *controller
	stores map[schema.GroupResource]cache.Indexer
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		t:      t,
		client: fake.NewClientset(controllertest.DeepCopies(objs...)...),
		stores: map[schema.GroupResource]cache.Indexer{},
	}
	for _, o := range objs {
		gr := groupResourceOf(t, o)
		if f.stores[gr] == nil {
			f.stores[gr] = controllertest.NamespacedIndexer[runtime.Object](t)
		}
		if p, ok := o.(*corev1.Pod); ok {
			o = cached(t, p) // as the pods informer holds it
		}
		if err := f.stores[gr].Add(o); err != nil {
			t.Fatal(err)
		}
	}
	quotas := f.store(schema.GroupResource{Resource: "resourcequotas"})
	c := &controller{
		client:   f.client,
		quotas:   corelisters.NewResourceQuotaLister(quotas),
		workers:  1,
		primary:  workloop.New(primaryQueue, nil, workloop.Options{}),
		priority: workloop.New(priorityQueue, nil, workloop.Options{}),
	}
	t.Cleanup(func() { c.primary.ShutDown(); c.priority.ShutDown() })
	c.registry = newRegistry(
		builtinEvaluators(f.lister, clocktesting.NewFakePassiveClock(epoch), true)...)
	f.c = c
	return f
}

func (f *fixture) store(gr schema.GroupResource) cache.Indexer {
	if f.stores[gr] == nil {
		f.stores[gr] = controllertest.NamespacedIndexer[runtime.Object](f.t)
	}
	return f.stores[gr]
}

func (f *fixture) lister(gvr schema.GroupVersionResource) listFunc {
	return func(ns string) ([]runtime.Object, error) {
		return cache.NewGenericLister(f.store(gvr.GroupResource()), gvr.GroupResource()).
			ByNamespace(ns).
			List(labels.Everything())
	}
}

func groupResourceOf(t *testing.T, o runtime.Object) schema.GroupResource {
	switch o.(type) {
	case *corev1.Pod:
		return podsResource
	case *corev1.Secret:
		return schema.GroupResource{Resource: "secrets"}
	case *corev1.ConfigMap:
		return schema.GroupResource{Resource: "configmaps"}
	case *corev1.Service:
		return servicesResource
	case *corev1.ResourceQuota:
		return schema.GroupResource{Resource: "resourcequotas"}
	case *appsv1.Deployment:
		return schema.GroupResource{Group: "apps", Resource: "deployments"}
	}
	t.Fatalf("no resource for %T", o)
	return schema.GroupResource{}
}

// statusUpdates returns the quota statuses written, in order.
func (f *fixture) statusUpdates() []*corev1.ResourceQuota {
	var out []*corev1.ResourceQuota
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" &&
			a.GetResource().Resource == "resourcequotas" {
			out = append(out, u.GetObject().(*corev1.ResourceQuota))
		}
	}
	return out
}

func quota(
	name string,
	hard corev1.ResourceList,
	status *corev1.ResourceQuotaStatus,
) *corev1.ResourceQuota {
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}
	if status != nil {
		q.Status = *status
	}
	return q
}

func secret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func TestSyncWritesMaskedUsage(t *testing.T) {
	done := testPod("done", ctr("c", rl("cpu", "1"), nil))
	done.Status.Phase = corev1.PodSucceeded
	q := quota(
		"q",
		rl(
			"pods",
			"10",
			"count/pods",
			"10",
			"requests.cpu",
			"4",
			"secrets",
			"5",
			"count/widgets.example.com",
			"3",
		),
		&corev1.ResourceQuotaStatus{
			Hard: rl("pods", "10"),
			Used: rl("pods", "9", "configmaps", "2", "count/widgets.example.com", "1"),
		},
	)
	f := newFixture(
		t,
		q,
		testPod("run", ctr("c", rl("cpu", "250m"), nil)),
		done,
		secret("ns", "s"),
		secret("other", "s"),
	)
	if err := f.c.sync(t.Context(), "ns/q"); err != nil {
		t.Fatal(err)
	}
	ups := f.statusUpdates()
	if len(ups) != 1 {
		t.Fatalf("%d status updates, want 1", len(ups))
	}
	checkList(t, "status.hard", ups[0].Status.Hard, q.Spec.Hard)
	// configmaps is not limited any more: masked away; nothing measures
	// widgets: the former usage stays.
	checkList(
		t,
		"status.used",
		ups[0].Status.Used,
		rl(
			"pods",
			"1",
			"count/pods",
			"2",
			"requests.cpu",
			"250m",
			"secrets",
			"1",
			"count/widgets.example.com",
			"1",
		),
	)

	// The status written is the status kept: nothing more to write.
	if err := f.stores[schema.GroupResource{Resource: "resourcequotas"}].Update(ups[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.c.sync(t.Context(), "ns/q"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.statusUpdates()); n != 1 {
		t.Errorf("%d status updates after an unchanged sync, want still 1", n)
	}
}

func TestSyncWritesWhenStatusMissing(t *testing.T) {
	tests := []struct {
		name   string
		status *corev1.ResourceQuotaStatus
		writes int
	}{
		{"no status", nil, 1},
		{
			"hard differs",
			&corev1.ResourceQuotaStatus{Hard: rl("secrets", "4"), Used: rl("secrets", "1")},
			1,
		},
		{
			"used differs",
			&corev1.ResourceQuotaStatus{Hard: rl("secrets", "5"), Used: rl("secrets", "3")},
			1,
		},
		{
			"up to date (1000m equals 1)",
			&corev1.ResourceQuotaStatus{Hard: rl("secrets", "5000m"), Used: rl("secrets", "1")},
			0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, quota("q", rl("secrets", "5"), tt.status), secret("ns", "a"))
			if err := f.c.sync(t.Context(), "ns/q"); err != nil {
				t.Fatal(err)
			}
			if n := len(f.statusUpdates()); n != tt.writes {
				t.Errorf("%d status updates, want %d", n, tt.writes)
			}
		})
	}
}

func TestSyncKeepsUsageWhenMeasuringFails(t *testing.T) {
	q := quota(
		"q",
		rl("secrets", "5", "configmaps", "5"),
		&corev1.ResourceQuotaStatus{
			Hard: rl("secrets", "5", "configmaps", "5"),
			Used: rl("secrets", "3", "configmaps", "3"),
		},
	)
	f := newFixture(
		t,
		q,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}},
	)
	broken := newCountEvaluator(
		schema.GroupResource{Resource: "secrets"},
		func(string) ([]runtime.Object, error) {
			return nil, errors.New("secrets not yet synced")
		},
		corev1.ResourceSecrets,
	)
	f.c.registry.byRes[broken.resource] = broken
	err := f.c.sync(t.Context(), "ns/q")
	if err == nil || !strings.Contains(err.Error(), "secrets not yet synced") {
		t.Fatalf("sync error %v, want the listing failure", err)
	}
	ups := f.statusUpdates()
	if len(ups) != 1 {
		t.Fatalf("%d status updates, want 1", len(ups))
	}
	checkList(t, "status.used", ups[0].Status.Used, rl("secrets", "3", "configmaps", "1"))
}

func TestSyncDeletedQuota(t *testing.T) {
	f := newFixture(t)
	if err := f.c.sync(t.Context(), "ns/gone"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.sync(t.Context(), "a/b/c"); !workloop.IsPermanent(err) {
		t.Errorf("bad key: %v, want a permanent error", err)
	}
}

func TestAddQuotaQueues(t *testing.T) {
	tests := []struct {
		name     string
		q        *corev1.ResourceQuota
		priority bool
	}{
		{"new quota", quota("q", rl("pods", "1"), nil), true},
		{
			"limits changed",
			quota(
				"q",
				rl("pods", "2"),
				&corev1.ResourceQuotaStatus{Hard: rl("pods", "1"), Used: rl("pods", "0")},
			),
			true,
		},
		{
			"a measured usage missing",
			quota(
				"q",
				rl("pods", "1", "secrets", "1"),
				&corev1.ResourceQuotaStatus{
					Hard: rl("pods", "1", "secrets", "1"),
					Used: rl("pods", "0"),
				},
			),
			true,
		},
		{
			"only an unmeasured usage missing",
			quota(
				"q",
				rl("pods", "1", "count/widgets.example.com", "1"),
				&corev1.ResourceQuotaStatus{
					Hard: rl("pods", "1", "count/widgets.example.com", "1"),
					Used: rl("pods", "0"),
				},
			),
			false,
		},
		{
			"complete",
			quota(
				"q",
				rl("pods", "1"),
				&corev1.ResourceQuotaStatus{Hard: rl("pods", "1"), Used: rl("pods", "0")},
			),
			false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.c.addQuota(tt.q)
			if got := f.c.priority.Len() == 1 && f.c.primary.Len() == 0; got != tt.priority {
				t.Errorf(
					"priority %d, primary %d; want on the priority queue: %v",
					f.c.priority.Len(),
					f.c.primary.Len(),
					tt.priority,
				)
			}
			if f.c.priority.Len()+f.c.primary.Len() != 1 {
				t.Errorf("queued %d times, want once", f.c.priority.Len()+f.c.primary.Len())
			}
		})
	}
}

func TestReplenishQueuesMatchingQuotas(t *testing.T) {
	limited := func(name string, hard corev1.ResourceList) *corev1.ResourceQuota {
		return quota(
			name,
			hard,
			&corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{}},
		)
	}
	// The cache may not hold the controller's status writes yet: a quota
	// limits what its spec names.
	newLimit := quota(
		"new-limit",
		rl("secrets", "1", "pods", "1"),
		&corev1.ResourceQuotaStatus{Hard: rl("secrets", "1"), Used: rl("secrets", "0")},
	)
	f := newFixture(
		t,
		limited(
			"pods",
			rl("pods", "1"),
		),
		limited("cpu", rl("requests.cpu", "1")),
		limited("secrets", rl("secrets", "1")),
		quota("unmeasured", rl("pods", "1"), nil), // status.hard not yet written
		newLimit,
	)
	f.c.replenish(podsResource, "ns")
	if n := f.c.primary.Len(); n != 4 {
		t.Errorf("pods: %d quotas queued, want 4 (pods, cpu, unmeasured, new-limit)", n)
	}
	g := newFixture(t, limited("pods", rl("pods", "1")))
	g.c.replenish(schema.GroupResource{Group: "example.com", Resource: "widgets"}, "ns")
	g.c.replenish(podsResource, "other")
	if n := g.c.primary.Len(); n != 0 {
		t.Errorf("%d quotas queued for an unknown resource or another namespace, want 0", n)
	}
}

// TestDeletionBeforeOwnWriteIsCached drives, in order, the race of a new
// quota's first status write with a deletion: the quota is measured and
// its status written; a secret is deleted before the informer delivers
// that write (the cached quota still has no status); then the write
// arrives. The deletion must queue the quota, and its recount must bring
// the usage down, instead of leaving it overcounted until the next full
// resync.
func TestDeletionBeforeOwnWriteIsCached(t *testing.T) {
	secrets := schema.GroupResource{Resource: "secrets"}
	f := newFixture(t, quota("q", rl("secrets", "10"), nil), secret("ns", "a"), secret("ns", "b"))
	if err := f.c.sync(t.Context(), "ns/q"); err != nil {
		t.Fatal(err)
	}
	ups := f.statusUpdates()
	if len(ups) != 1 {
		t.Fatalf("%d status updates, want 1", len(ups))
	}
	checkList(t, "first status.used", ups[0].Status.Used, rl("secrets", "2"))

	// An informer updates its cache, then calls the handlers.
	if err := f.store(secrets).Delete(secret("ns", "a")); err != nil {
		t.Fatal(err)
	}
	f.c.replenish(secrets, "ns")
	if err := f.store(schema.GroupResource{Resource: "resourcequotas"}).Update(ups[0]); err != nil {
		t.Fatal(err)
	}
	if n := f.c.primary.Len(); n != 1 {
		t.Fatalf("the deletion queued %d quotas, want 1", n)
	}
	if err := f.c.sync(t.Context(), "ns/q"); err != nil {
		t.Fatal(err)
	}
	ups = f.statusUpdates()
	if len(ups) != 2 {
		t.Fatalf("%d status updates, want 2", len(ups))
	}
	checkList(t, "recounted status.used", ups[1].Status.Used, rl("secrets", "1"))
}

func TestChargeChanged(t *testing.T) {
	pod := testPod("p", ctr("c", rl("cpu", "1"), nil))
	with := func(p *corev1.Pod, f func(*corev1.Pod)) *corev1.Pod { p = p.DeepCopy(); f(p); return p }
	svc := func(t corev1.ServiceType) *corev1.Service { return &corev1.Service{Spec: corev1.ServiceSpec{Type: t}} }
	tests := []struct {
		name     string
		gr       schema.GroupResource
		old, new any
		want     bool
	}{
		{
			"pod relabelled",
			podsResource,
			pod,
			with(pod, func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }),
			false,
		},
		{
			"pod running",
			podsResource,
			pod,
			with(pod, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }),
			false,
		},
		{
			"pod succeeded",
			podsResource,
			pod,
			with(pod, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			true,
		},
		{
			"pod failed",
			podsResource,
			pod,
			with(pod, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
			true,
		},
		{
			"pod terminating",
			podsResource,
			pod,
			with(pod, func(p *corev1.Pod) { v := int64(5); p.Spec.ActiveDeadlineSeconds = &v }),
			true,
		},
		{"pod resized", podsResource,
			with(
				pod,
				func(p *corev1.Pod) { p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c"}} },
			),
			with(pod, func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{
					{Name: "c", Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "2")}},
				}
			}), true},
		{"pod's sidecar resized", podsResource,
			with(pod, func(p *corev1.Pod) {
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "side"}}
			}),
			with(pod, func(p *corev1.Pod) {
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "side",
					Resources: &corev1.ResourceRequirements{Limits: rl("cpu", "2")}}}
			}), true},
		{
			"service becomes a load balancer",
			servicesResource,
			svc(corev1.ServiceTypeClusterIP),
			svc(corev1.ServiceTypeLoadBalancer),
			true,
		},
		{
			"ClusterIP to ExternalName",
			servicesResource,
			svc(corev1.ServiceTypeClusterIP),
			svc(corev1.ServiceTypeExternalName),
			false,
		},
		{
			"claim updated",
			pvcsResource,
			&corev1.PersistentVolumeClaim{},
			&corev1.PersistentVolumeClaim{},
			true,
		},
		{
			"other resources",
			schema.GroupResource{Resource: "secrets"},
			secret("ns", "a"),
			secret("ns", "a"),
			false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Pods as the pods informer hands them to the handler.
			old, cur := tt.old, tt.new
			if p, ok := old.(*corev1.Pod); ok {
				old = cached(t, p)
			}
			if p, ok := cur.(*corev1.Pod); ok {
				cur = cached(t, p)
			}
			if got := chargeChanged(tt.gr, old, cur); got != tt.want {
				t.Errorf("chargeChanged = %v, want %v", got, tt.want)
			}
		})
	}
}
