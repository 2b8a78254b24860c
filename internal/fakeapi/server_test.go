package fakeapi_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/internal/fakeapi"
	"github.com/ctrlhost/ctrlhost/internal/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(t *testing.T, s *fakeapi.Server) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(fakeapi.Config(s, nil))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestCRUD: creates, updates with stale resourceVersions, preconditions
// and patches behave as the API server's, with its status codes.
func TestCRUD(t *testing.T) {
	ctx := context.Background()
	s := fakeapi.New()
	cs := client(t, s)
	cms := cs.CoreV1().ConfigMaps("ns")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Data: map[string]string{"k": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.ResourceVersion == "" || cm.UID == "" || cm.Namespace != "ns" {
		t.Fatalf("created %+v: want resourceVersion, uid and namespace set", cm.ObjectMeta)
	}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want AlreadyExists", err)
	}
	stale := cm.DeepCopy()
	cm.Data["k"] = "2"
	if _, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale.Data["k"] = "3"
	if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale update: %v, want Conflict", err)
	}
	patched, err := cms.Patch(
		ctx,
		"a",
		types.MergePatchType,
		[]byte(`{"data":{"p":"x"}}`),
		metav1.PatchOptions{},
	)
	if err != nil || patched.Data["p"] != "x" || patched.Data["k"] != "2" {
		t.Errorf("patch: %v, %v", patched, err)
	}
	wrongUID := types.UID("nope")
	err = cms.Delete(
		ctx,
		"a",
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}},
	)
	if !apierrors.IsConflict(err) {
		t.Errorf("delete with a wrong UID: %v, want Conflict", err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
}

// TestStatusSubresource: an update of the object keeps the stored status,
// an update of .../status changes only the status.
func TestStatusSubresource(t *testing.T) {
	ctx := context.Background()
	s := fakeapi.New()
	pods := client(t, s).CoreV1().Pods("ns")
	p, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodPending {
		t.Errorf("create left the status %q, want the server's Pending", p.Status.Phase)
	}
	p.Status.Phase = corev1.PodSucceeded
	if p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil ||
		p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("UpdateStatus: %v %v", p.Status.Phase, err)
	}
	p.Status.Phase = corev1.PodFailed
	p.Labels = map[string]string{"a": "b"}
	if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodSucceeded || p.Labels["a"] != "b" {
		t.Errorf(
			"Update: phase %q labels %v; want the stored status and the new labels",
			p.Status.Phase,
			p.Labels,
		)
	}
}

// TestInformerAndDroppedWatches: an informer lists and watches (streaming
// its initial list), sees later writes, and resyncs after the server drops
// every watch; all of it inside a synctest bubble.
func TestInformerAndDroppedWatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := fakeapi.New()
		configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		if err := s.Create(configMaps, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: "ns"}}); err != nil {
			t.Fatal(err)
		}
		cs := client(t, s)
		f := informers.NewSharedInformerFactory(cs, 0)
		inf := f.Core().V1().ConfigMaps()
		lister := inf.Lister()
		inf.Informer()
		f.Start(ctx.Done())
		defer func() {
			cancel() // before Shutdown, which waits for the informers to stop
			f.Shutdown()
		}()
		if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
			t.Fatal("never synced")
		}
		if _, err := lister.ConfigMaps("ns").Get("before"); err != nil {
			t.Fatalf("initial list: %v", err)
		}
		s.DropWatches()
		if _, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Within(time.Minute).Until(t, // fake time in the bubble
			"the informer to see the write made after the watches dropped",
			func() bool {
				_, err := lister.ConfigMaps("ns").Get("after")
				return err == nil
			})
		cancel()
		f.Shutdown()
	})
}

// TestWatchFromResourceVersion: a watch resumes after a resourceVersion,
// filtered by name; a too old one is 410 Gone (an ERROR event).
func TestWatchFromResourceVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := fakeapi.New()
		leases := client(t, s).CoordinationV1().Leases("kube-system")
		l, err := leases.Create(
			ctx,
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
			metav1.CreateOptions{},
		)
		if err != nil {
			t.Fatal(err)
		}
		b := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
		if _, err := leases.Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		w, err := leases.Watch(
			ctx,
			metav1.ListOptions{
				ResourceVersion: l.ResourceVersion,
				FieldSelector:   "metadata.name=a",
			},
		)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		l.Spec.HolderIdentity = ptr.To("x")
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := <-w.ResultChan()
		if got := ev.Object.(*coordinationv1.Lease); ev.Type != watch.Modified || got.Name != "a" ||
			*got.Spec.HolderIdentity != "x" {
			t.Errorf("event %v %v, want the update of a", ev.Type, got)
		}
		s.DropWatches()
		if _, ok := <-w.ResultChan(); ok {
			t.Error("the watch outlived DropWatches")
		}
		// As kube-apiserver's watch cache: the watch starts, and its one
		// event is the 410.
		w, err = leases.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ev = <-w.ResultChan()
		if err := apierrors.FromObject(ev.Object); ev.Type != watch.Error ||
			!apierrors.IsResourceExpired(err) {
			t.Errorf(
				"watch from a forgotten resourceVersion: %s %v, want a 410 error",
				ev.Type,
				err,
			)
		}
	})
}

// TestHookRefuses: a Hook sees each request's verb and user agent and may
// refuse it with an API status.
func TestHookRefuses(t *testing.T) {
	s := fakeapi.New()
	var seen []string
	s.SetHook(func(_ http.ResponseWriter, r *fakeapi.Request) error {
		seen = append(seen, r.Verb+" "+r.Resource.GVR.Resource+" "+r.Name)
		if r.Mutating() {
			return apierrors.NewForbidden(r.Resource.GVR.GroupResource(), r.Name, errors.New("no"))
		}
		return nil
	})
	cms := client(t, s).CoreV1().ConfigMaps("ns")
	_, err := cms.Create(
		context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}},
		metav1.CreateOptions{},
	)
	if !apierrors.IsForbidden(err) {
		t.Errorf("create: %v, want Forbidden", err)
	}
	if _, err := cms.Get(context.Background(), "c", metav1.GetOptions{}); !apierrors.IsNotFound(
		err,
	) {
		t.Errorf("get: %v, want NotFound", err)
	}
	want := []string{"create configmaps c", "get configmaps c"}
	if len(seen) != 2 || seen[0] != want[0] || seen[1] != want[1] {
		t.Errorf("hook saw %q, want %q", seen, want)
	}
}

// TestAPIServerSemantics: what controllers rely on beyond plain storage:
// generation bumped by spec changes only, finalizers holding a deletion,
// server-side apply creating and merging, custom resources added and
// removed at run time, and metadata-only answers for metadata clients.
func TestAPIServerSemantics(t *testing.T) {
	ctx := context.Background()
	s := fakeapi.New()
	cs := client(t, s)
	pods := cs.CoreV1().Pods("ns")
	p, err := pods.Create(
		ctx,
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Finalizers: []string{"x/y"}},
			Spec: corev1.PodSpec{NodeName: "a"}},
		metav1.CreateOptions{},
	)
	if err != nil {
		t.Fatal(err)
	}
	if p.Generation != 1 {
		t.Errorf("generation after create = %d, want 1", p.Generation)
	}
	p.Labels = map[string]string{"l": "v"}
	if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil || p.Generation != 1 {
		t.Errorf("a label change: generation %d, %v; want 1", p.Generation, err)
	}
	p.Spec.NodeName = "b"
	if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil || p.Generation != 2 {
		t.Errorf("a spec change: generation %d, %v; want 2", p.Generation, err)
	}
	p.Status.Phase = corev1.PodRunning
	if p, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil || p.Generation != 2 {
		t.Errorf("a status change: generation %d, %v; want 2", p.Generation, err)
	}

	// A Pod bound to a node would wait out a grace period.
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	if err := pods.Delete(ctx, "p", now); err != nil {
		t.Fatal(err)
	}
	if p, err = pods.Get(ctx, "p", metav1.GetOptions{}); err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("a deleted pod with a finalizer: %v, %v; want it kept, marked", p, err)
	}
	p.Finalizers = nil
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after its last finalizer went: %v, want NotFound", err)
	}

	cms := cs.CoreV1().ConfigMaps("ns")
	apply := []byte(
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: \"1\"\n",
	)
	_, err = cms.Patch(ctx, "applied", types.ApplyPatchType, apply, metav1.PatchOptions{})
	if err == nil {
		t.Error("an apply without fieldManager succeeded")
	}
	cm, err := cms.Patch(
		ctx,
		"applied",
		types.ApplyPatchType,
		apply,
		metav1.PatchOptions{FieldManager: "m"},
	)
	if err != nil || cm.Data["a"] != "1" {
		t.Fatalf("apply creating: %v, %v", cm, err)
	}
	apply = []byte(
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"applied"},"data":{"b":"2"}}`,
	)
	cm, err = cms.Patch(ctx, "applied", types.ApplyPatchType, apply,
		metav1.PatchOptions{FieldManager: "m"})
	if err != nil || cm.Data["b"] != "2" {
		t.Errorf("apply merging: %v, %v", cm, err)
	}

	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	s.AddResource(fakeapi.Resource{GVR: widgets, Kind: "Widget", Namespaced: true, Status: true})
	dyn, err := dynamic.NewForConfig(fakeapi.Config(s, nil))
	if err != nil {
		t.Fatal(err)
	}
	w := &unstructured.Unstructured{
		Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"size": int64(1)}},
	}
	widgetsNS := dyn.Resource(widgets).Namespace("ns")
	if _, err := widgetsNS.Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	md, err := metadata.NewForConfig(fakeapi.Config(s, nil))
	if err != nil {
		t.Fatal(err)
	}
	pm, err := md.Resource(widgets).Namespace("ns").Get(ctx, "w", metav1.GetOptions{})
	if err != nil || pm.Name != "w" || pm.Generation != 1 {
		t.Errorf("a metadata client's get: %+v, %v", pm, err)
	}
	if list, err := md.Resource(widgets).List(ctx, metav1.ListOptions{}); err != nil ||
		len(list.Items) != 1 {
		t.Errorf("a metadata client's list: %+v, %v", list, err)
	}
	s.RemoveResource(widgets)
	if _, err := widgetsNS.Get(ctx, "w", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the resource was removed: %v, want NotFound", err)
	}
}

// TestFixturesKeepWhatTheySet: Create, for fixtures, keeps the identity
// and status an object sets, and fills in the rest.
func TestFixturesKeepWhatTheySet(t *testing.T) {
	s := fakeapi.New()
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	if err := s.Create(pods, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "seeded"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}); err != nil {
		t.Fatal(err)
	}
	p, err := client(t, s).CoreV1().Pods("ns").Get(t.Context(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.UID != "seeded" || p.Status.Phase != corev1.PodRunning || p.ResourceVersion == "" ||
		p.Generation != 1 || p.CreationTimestamp.IsZero() {
		t.Errorf("seeded pod %+v, %+v; want uid and status kept, the rest filled in",
			p.ObjectMeta, p.Status)
	}
}

// TestFieldsAreTrackedFromTheFirstApply: an object nobody applied records
// no managers; from its first apply on, every write does.
func TestFieldsAreTrackedFromTheFirstApply(t *testing.T) {
	ctx := t.Context()
	cms := client(t, fakeapi.New()).CoreV1().ConfigMaps("ns")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Data: map[string]string{"k": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.ManagedFields) != 0 {
		t.Errorf("managed fields %v before any apply, want none", cm.ManagedFields)
	}
	apply := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},` +
		`"data":{"a":"1"}}`)
	if cm, err = cms.Patch(ctx, "a", types.ApplyPatchType, apply,
		metav1.PatchOptions{FieldManager: "applier"}); err != nil {
		t.Fatal(err)
	}
	cm.Data["u"] = "1"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "updater"}); err != nil {
		t.Fatal(err)
	}
	var managers []string
	for _, e := range cm.ManagedFields {
		managers = append(managers, e.Manager)
	}
	slices.Sort(managers)
	if want := []string{"applier", "before-first-apply", "updater"}; !slices.Equal(managers, want) {
		t.Errorf("managers %v, want %v", managers, want)
	}
}

// TestContinueAfterARestart: a continue token the server no longer keeps
// is 410 Gone, as an expired one is.
func TestContinueAfterARestart(t *testing.T) {
	ctx := t.Context()
	s := fakeapi.New()
	cms := client(t, s).CoreV1().ConfigMaps("ns")
	for _, n := range []string{"a", "b"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := cms.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || first.Continue == "" {
		t.Fatalf("first page %v, %v; want a continue token", first, err)
	}
	s.DropWatches()
	_, err = cms.List(ctx, metav1.ListOptions{Limit: 1, Continue: first.Continue})
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("continuing after a restart: %v, want 410", err)
	}
}
