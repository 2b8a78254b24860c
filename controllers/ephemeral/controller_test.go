package ephemeral

import (
	"errors"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/workloop"
)

const ns = "ns"

func template(label string) *corev1.PersistentVolumeClaimTemplate {
	return &corev1.PersistentVolumeClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": label},
			Annotations: map[string]string{"note": label}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("fast"),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: "node-a",
			Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ephemeral(volume string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: volume,
			VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: template(volume)}}})
	}
}

func mounts(claim string) podOpt {
	return func(p *corev1.Pod) {
		src := &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v" + claim,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: src}})
	}
}

func deleting(p *corev1.Pod) {
	t := metav1.NewTime(controllertest.Epoch)
	p.DeletionTimestamp = &t
}

func claim(name string, owner *corev1.Pod) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if owner != nil {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod",
			Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
	}
	return c
}

// wantClaim is the claim the controller makes of pod's ephemeral volume.
func wantClaim(pod *corev1.Pod, volume string) *corev1.PersistentVolumeClaim {
	t := template(volume)
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name + "-" + volume,
			Labels: t.Labels, Annotations: t.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod",
				Name: pod.Name, UID: pod.UID, Controller: ptr.To(true),
				BlockOwnerDeletion: ptr.To(true)}}},
		Spec: t.Spec,
	}
}

// fixture is a controller over listers filled directly (the pods as the
// host would cache them: pruned to the declared reads), a fake clientset
// and a recorder.
type fixture struct {
	c        *controller
	client   *fake.Clientset
	recorder *record.FakeRecorder
}

func newFixture(t *testing.T, pods []*corev1.Pod, claims []*corev1.PersistentVolumeClaim) *fixture {
	t.Helper()
	indexers := index.PodsByClaimIndexers()
	indexers[cache.NamespaceIndex] = cache.MetaNamespaceIndexFunc
	podIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
	for _, p := range controllertest.Pruned(t, Descriptor(NewOptions()), pods...) {
		if err := podIdx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset(controllertest.DeepCopies(claims...)...)
	m, err := metricsOn(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(10)
	c := &controller{
		client:   client,
		pods:     corelisters.NewPodLister(podIdx),
		podIndex: podIdx,
		claims: corelisters.NewPersistentVolumeClaimLister(
			controllertest.NamespacedIndexer(t, claims...)),
		recorder: rec,
		metrics:  m,
		workers:  1,
	}
	c.loop = workloop.New("test", c.sync, workloop.Options{})
	t.Cleanup(c.loop.ShutDown)
	return &fixture{c: c, client: client, recorder: rec}
}

// created returns the claims the fixture's client was asked to create,
// and fails on any other action.
func (f *fixture) created(t *testing.T) []*corev1.PersistentVolumeClaim {
	t.Helper()
	var out []*corev1.PersistentVolumeClaim
	for _, a := range f.client.Actions() {
		c, ok := a.(k8stesting.CreateAction)
		if !ok {
			t.Errorf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
			continue
		}
		out = append(out, c.GetObject().(*corev1.PersistentVolumeClaim))
	}
	return out
}

func TestSync(t *testing.T) {
	web := pod("web", ephemeral("data"), ephemeral("cache"), mounts("shared"))
	tests := []struct {
		name        string
		pod         *corev1.Pod
		claims      []*corev1.PersistentVolumeClaim
		wantCreated []*corev1.PersistentVolumeClaim
		wantEvent   string // "": none, and no error
	}{
		{name: "each missing claim is made from its template, controlled by the pod",
			pod: web, wantCreated: []*corev1.PersistentVolumeClaim{
				wantClaim(web, "data"), wantClaim(web, "cache")}},
		{name: "the pod's claims exist: nothing",
			pod: web,
			claims: []*corev1.PersistentVolumeClaim{
				claim("web-data", web), claim("web-cache", web)}},
		{name: "the first exists, the second is made",
			pod: web, claims: []*corev1.PersistentVolumeClaim{claim("web-data", web)},
			wantCreated: []*corev1.PersistentVolumeClaim{wantClaim(web, "cache")}},
		{name: "a claim of that name not the pod's: a warning, and the rest waits",
			pod: web, claims: []*corev1.PersistentVolumeClaim{claim("web-data", nil)},
			wantEvent: "Warning FailedBinding ephemeral volume data: " +
				"PVC ns/web-data was not created for pod ns/web (pod is not owner)"},
		{name: "a claim of another pod of the same name",
			pod: web, claims: []*corev1.PersistentVolumeClaim{claim("web-cache",
				pod("web", func(p *corev1.Pod) { p.UID = "old" }))},
			wantCreated: []*corev1.PersistentVolumeClaim{wantClaim(web, "data")},
			wantEvent: "Warning FailedBinding ephemeral volume cache: " +
				"PVC ns/web-cache was not created for pod ns/web (pod is not owner)"},
		{name: "a pod being deleted: nothing", pod: pod("web", ephemeral("data"), deleting)},
		{name: "a pod without ephemeral volumes: nothing", pod: pod("web", mounts("web-data"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, []*corev1.Pod{tt.pod}, tt.claims)
			err := f.c.sync(controllertest.LogContext(t), ns+"/web")
			if (err != nil) != (tt.wantEvent != "") {
				t.Errorf("sync error %v, want one: %v", err, tt.wantEvent != "")
			}
			got := f.created(t)
			if len(got) != len(tt.wantCreated) {
				t.Fatalf("created %d claims, want %d", len(got), len(tt.wantCreated))
			}
			for i := range got {
				if !equality.Semantic.DeepEqual(got[i], tt.wantCreated[i]) {
					t.Errorf("created %+v,\nwant %+v", got[i], tt.wantCreated[i])
				}
			}
			var want []string
			if tt.wantEvent != "" {
				want = []string{tt.wantEvent}
			}
			if ev := controllertest.Events(f.recorder); !slices.Equal(ev, want) {
				t.Errorf("events %q, want %q", ev, want)
			}
			if n := value(t, f.c.metrics.creates); int(n) != len(got) {
				t.Errorf("create_total %v, want %d", n, len(got))
			}
		})
	}
}

func TestSyncCreateFails(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{pod("web", ephemeral("data"))}, nil)
	f.client.PrependReactor("create", "persistentvolumeclaims",
		func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("boom")
		})
	err := f.c.sync(t.Context(), ns+"/web")
	if err == nil || err.Error() != "pod ns/web, ephemeral volume data: create PVC web-data: boom" {
		t.Errorf("sync error %v", err)
	}
	want := []string{"Warning FailedBinding ephemeral volume data: create PVC web-data: boom"}
	if ev := controllertest.Events(f.recorder); !slices.Equal(ev, want) {
		t.Errorf("events %q, want %q", ev, want)
	}
	if a, b := value(t, f.c.metrics.creates),
		value(t, f.c.metrics.createFailures); a != 1 || b != 1 {
		t.Errorf("create_total %v, create_failures_total %v; want 1, 1", a, b)
	}
	if err := f.c.sync(t.Context(), ns+"/gone"); err != nil {
		t.Errorf("sync of a gone pod: %v", err)
	}
	if err := f.c.sync(t.Context(), "a/b/c"); !workloop.IsPermanent(err) {
		t.Errorf("sync of a bad key: %v, want a permanent error", err)
	}
}

func TestSyncWithoutTemplate(t *testing.T) {
	p := pod("web", ephemeral("data"))
	p.Spec.Volumes[0].Ephemeral.VolumeClaimTemplate = nil
	f := newFixture(t, []*corev1.Pod{p}, nil)
	if err := f.c.sync(t.Context(), ns+"/web"); !workloop.IsPermanent(err) {
		t.Errorf("sync error %v, want a permanent one", err)
	}
}

func TestHandlers(t *testing.T) {
	web := pod("web", ephemeral("data"))
	direct := pod("direct", mounts("web-data"))
	tests := []struct {
		name string
		do   func(c *controller)
		want int // keys queued
	}{
		{"a pod with an ephemeral volume", func(c *controller) { c.podAdded(web) }, 1},
		{"a pod without", func(c *controller) { c.podAdded(direct) }, 0},
		{"a pod being deleted",
			func(c *controller) { c.podAdded(pod("x", ephemeral("data"), deleting)) }, 0},
		{"not a pod", func(c *controller) { c.podAdded("x") }, 0},
		{"a deleted claim: the pods with ephemeral volumes that name it",
			func(c *controller) { c.claimDeleted(claim("web-data", nil)) }, 1},
		{"a deleted claim's tombstone", func(c *controller) {
			c.claimDeleted(cache.DeletedFinalStateUnknown{Key: "ns/web-data",
				Obj: claim("web-data", nil)})
		}, 1},
		{"a deleted claim no pod names",
			func(c *controller) { c.claimDeleted(claim("other", nil)) }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, []*corev1.Pod{web, direct}, nil)
			tt.do(f.c)
			if n := f.c.loop.Len(); n != tt.want {
				t.Errorf("queued %d keys, want %d", n, tt.want)
			}
		})
	}
}

// TestMetricsOnAHostRegistry: a second term reuses the counters of the
// first; a collector of another kind under the name is an error.
func TestMetricsOnAHostRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := metricsOn(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := metricsOn(reg)
	if err != nil {
		t.Fatal(err)
	}
	b.creates.Inc()
	if n := value(t, a.creates); n != 1 {
		t.Errorf("the first term's counter reads %v, want 1", n)
	}
	families, err := reg.Gather()
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	if want := []string{"ephemeral_volume_controller_create_failures_total",
		"ephemeral_volume_controller_create_total"}; err != nil || !slices.Equal(names, want) {
		t.Errorf("gathered %q (%v), want %q", names, err, want)
	}
	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ephemeral_volume_controller_create_total", Help: "x"}))
	if _, err := metricsOn(clash); err == nil {
		t.Error("no error over a clashing collector")
	}
	if m, err := metricsOn(nil); err != nil || m.creates == nil {
		t.Errorf("metricsOn(nil) = %v, %v", m, err)
	}
}

func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
