package vacprotection

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

const other = "example.com/other"

func class(name string, deleting bool, finalizers ...string) *storagev1.VolumeAttributesClass {
	vac := &storagev1.VolumeAttributesClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: finalizers},
		DriverName: "csi.example.com"}
	if deleting {
		now := metav1.Now()
		vac.DeletionTimestamp = &now
	}
	return vac
}

func volume(name, class string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if class != "" {
		pv.Spec.VolumeAttributesClassName = ptr.To(class)
	}
	return pv
}

// claim names spec, current and target (the modification's) classes;
// "" leaves one unset.
func claim(name, spec, current, target string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns",
		Name: name}}
	if spec != "" {
		pvc.Spec.VolumeAttributesClassName = ptr.To(spec)
	}
	if current != "" {
		pvc.Status.CurrentVolumeAttributesClassName = ptr.To(current)
	}
	if target != "" {
		pvc.Status.ModifyVolumeStatus = &corev1.ModifyVolumeStatus{
			TargetVolumeAttributesClassName: target,
			Status:                          corev1.PersistentVolumeClaimModifyVolumeInProgress}
	}
	return pvc
}

// newTestController holds objs in its caches (classes, volumes, claims),
// indexed as the informers are, over a fake clientset holding copies.
func newTestController(t *testing.T, objs ...runtime.Object) (*controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(controllertest.DeepCopies(objs...)...)
	client.ClearActions()
	c := &controller{
		client: client,
		classes: storagelisters.NewVolumeAttributesClassLister(controllertest.ClusterIndexer(t,
			controllertest.OfType[*storagev1.VolumeAttributesClass](objs)...)),
		pvs: indexer(t, cache.Indexers{pvsByClass: pvClassNames},
			controllertest.OfType[*corev1.PersistentVolume](objs)),
		pvcs: indexer(t, cache.Indexers{pvcsByClass: pvcClassNames},
			controllertest.OfType[*corev1.PersistentVolumeClaim](objs)),
	}
	return c, client
}

func indexer[T any](t *testing.T, indexers cache.Indexers, objs []T) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

// written returns the finalizers of each update, nil when nothing was
// written; it fails on any other action.
func written(t *testing.T, client *fake.Clientset) []string {
	t.Helper()
	var got []string
	for _, a := range client.Actions() {
		u, ok := a.(k8stesting.UpdateAction)
		if !ok || a.GetVerb() != "update" || a.GetResource().Resource != "volumeattributesclasses" {
			t.Errorf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
			continue
		}
		got = append([]string{}, u.GetObject().(*storagev1.VolumeAttributesClass).Finalizers...)
	}
	return got
}

func TestSync(t *testing.T) {
	tests := []struct {
		name string
		objs []runtime.Object
		want []string // the finalizers written; nil: nothing written
	}{
		{"a new class gets the finalizer",
			[]runtime.Object{class("gold", false, other)}, []string{other, Finalizer}},
		{"a class with it: nothing", []runtime.Object{class("gold", false, Finalizer)}, nil},
		{"deleted, unused: removed",
			[]runtime.Object{class("gold", true, other, Finalizer), volume("pv", "silver"),
				claim("c", "silver", "silver", "silver")},
			[]string{other}},
		{"deleted, a volume names it: kept",
			[]runtime.Object{class("gold", true, Finalizer), volume("pv", "gold")}, nil},
		{"deleted, a claim asks for it: kept",
			[]runtime.Object{class("gold", true, Finalizer), claim("c", "gold", "", "")}, nil},
		{"deleted, a claim's volume has it: kept",
			[]runtime.Object{class("gold", true, Finalizer), claim("c", "silver", "gold", "")},
			nil},
		{"deleted, a claim moves to it: kept",
			[]runtime.Object{class("gold", true, Finalizer),
				claim("c", "silver", "silver", "gold")},
			nil},
		{"deleted without it: nothing (not added back)",
			[]runtime.Object{class("gold", true, other)}, nil},
		{"gone: nothing", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client := newTestController(t, tt.objs...)
			if err := c.sync(controllertest.LogContext(t), "gold"); err != nil {
				t.Fatal(err)
			}
			got := written(t, client)
			if (got == nil) != (tt.want == nil) || !slices.Equal(got, tt.want) {
				t.Errorf("wrote finalizers %q, want %q (nil: no write)", got, tt.want)
			}
		})
	}
}

// TestSyncWriteError: a failed write is returned, naming the class, for
// the loop to retry.
func TestSyncWriteError(t *testing.T) {
	c, client := newTestController(t, class("gold", false))
	client.PrependReactor("update", "volumeattributesclasses",
		func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("boom")
		})
	err := c.sync(t.Context(), "gold")
	const want = "writing the finalizers of VolumeAttributesClass gold: boom"
	if err == nil || err.Error() != want {
		t.Errorf("sync = %v, want the write's error naming the class", err)
	}
}

// TestBrokenIndexKeepsTheClass: an index that cannot answer counts as a
// user, as in KCM, and the sync does not fail.
func TestBrokenIndexKeepsTheClass(t *testing.T) {
	c, client := newTestController(t, class("gold", true, Finalizer))
	c.pvs = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}) // no index
	if err := c.sync(controllertest.LogContext(t), "gold"); err != nil {
		t.Fatal(err)
	}
	if got := written(t, client); got != nil {
		t.Errorf("wrote finalizers %q, want no write", got)
	}
}

func TestOnlyClassesThatNeedAWriteAreQueued(t *testing.T) {
	for _, tt := range []struct {
		obj  any
		want bool
	}{
		{class("gold", false), true},
		{class("gold", false, Finalizer), false},
		{class("gold", true, Finalizer), true},
		{class("gold", true, other), false},
		{volume("gold", "gold"), false},
	} {
		if got := needsWrite(nil, tt.obj); got != tt.want {
			t.Errorf("needsWrite(%+v) = %v, want %v", tt.obj, got, tt.want)
		}
	}
}

func TestClassesOfPVC(t *testing.T) {
	for _, tt := range []struct {
		pvc  *corev1.PersistentVolumeClaim
		want []string
	}{
		{claim("c", "", "", ""), nil},
		{claim("c", "a", "", ""), []string{"a"}},
		{claim("c", "a", "b", "c"), []string{"a", "b", "c"}},
		{claim("c", "a", "a", "a"), []string{"a"}},
		{claim("c", "", "b", ""), []string{"b"}},
		{claim("c", "", "", "c"), []string{"c"}},
	} {
		if got := classesOfPVC(tt.pvc); !slices.Equal(got, tt.want) {
			t.Errorf("classesOfPVC(%+v, %+v) = %q, want %q", tt.pvc.Spec, tt.pvc.Status, got,
				tt.want)
		}
	}
	if got := classesOfPV(volume("v", "")); got != nil {
		t.Errorf("classesOfPV of a volume without a class = %q", got)
	}
	empty := volume("v", "")
	empty.Spec.VolumeAttributesClassName = ptr.To("")
	if got := classesOfPV(empty); got != nil {
		t.Errorf("classesOfPV of a volume with an empty class = %q", got)
	}
}

// TestUserEvents: an update queues the classes the volume or claim
// dropped, a deletion (tombstone included) all of its classes, an add
// none.
func TestUserEvents(t *testing.T) {
	tests := []struct {
		name  string
		event func(cache.ResourceEventHandler)
		want  []string
	}{
		{"claim added: nothing", func(h cache.ResourceEventHandler) {
			h.OnAdd(claim("c", "a", "", ""), false)
		}, nil},
		{"claim moved from a to b: a", func(h cache.ResourceEventHandler) {
			h.OnUpdate(claim("c", "a", "a", ""), claim("c", "b", "a", "b"))
			h.OnUpdate(claim("c", "b", "a", "b"), claim("c", "b", "b", ""))
		}, []string{"a"}},
		{"claim unchanged: nothing", func(h cache.ResourceEventHandler) {
			h.OnUpdate(claim("c", "a", "b", ""), claim("c", "a", "b", ""))
		}, nil},
		{"claim deleted: all its classes", func(h cache.ResourceEventHandler) {
			h.OnDelete(claim("c", "a", "b", "c"))
		}, []string{"a", "b", "c"}},
		{"claim deleted, tombstone: all its classes", func(h cache.ResourceEventHandler) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/c", Obj: claim("c", "a", "", "")})
		}, []string{"a"}},
		{"volume's class changed: the old one", func(h cache.ResourceEventHandler) {
			h.OnUpdate(volume("v", "a"), volume("v", "b"))
		}, []string{"a"}},
		{"volume deleted: its class", func(h cache.ResourceEventHandler) {
			h.OnDelete(volume("v", "a"))
		}, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			enqueue := func(name string) { got = append(got, name) }
			tt.event(userHandler(enqueue, pvClasses))
			tt.event(userHandler(enqueue, pvcClasses))
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("queued %q, want %q", got, tt.want)
			}
		})
	}
}
