package managertest_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
	"github.com/ctrlhost/ctrlhost/serving"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
	}
}

// metadataWatcher is a controller that records the pod names its metadata
// informer holds.
func metadataWatcher(store *atomic.Pointer[cache.Store]) descriptor.Descriptor {
	return descriptor.New(
		"metadata-watcher",
		func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			inf := cc.MetadataInformerFactory.ForResource(podsGVR).Informer()
			s := inf.GetStore()
			store.Store(&s)
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				<-ctx.Done()
				return nil
			}), nil
		},
	)
}

func hasKey(store *atomic.Pointer[cache.Store], key string) bool {
	s := store.Load()
	if s == nil {
		return false
	}
	_, ok, _ := (*s).GetByKey(key)
	return ok
}

func TestMetadataInformersSeeTypedObjects(t *testing.T) {
	var store atomic.Pointer[cache.Store]
	ds := []descriptor.Descriptor{metadataWatcher(&store)}
	h := managertest.New(t, "test", ds, pod("seeded", nil)).Start()
	h.WaitRunning("metadata-watcher")
	managertest.Eventually(t, "seeded pod in the metadata informer",
		func() bool { return hasKey(&store, "default/seeded") })

	pods := h.Client.CoreV1().Pods("default")
	if _, err := pods.Create(context.Background(), pod("written", nil),
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "pod created through h.Client in the metadata informer",
		func() bool { return hasKey(&store, "default/written") })

	if err := pods.Delete(context.Background(), "seeded", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "pod deleted through h.Client gone from the metadata informer",
		func() bool { return !hasKey(&store, "default/seeded") })
	if err := h.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// countingMetadata wraps a metadata.Interface and counts Resource calls.
type countingMetadata struct {
	metadata.Interface
	calls atomic.Int32
}

func (c *countingMetadata) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	c.calls.Add(1)
	return c.Interface.Resource(gvr)
}

func (c *countingMetadata) IsWatchListSemanticsUnSupported() bool { return true }

func TestMetadataFieldIsHonoured(t *testing.T) {
	var store atomic.Pointer[cache.Store]
	h := managertest.New(t, "test", []descriptor.Descriptor{metadataWatcher(&store)}, pod("p", nil))
	counting := &countingMetadata{Interface: h.Metadata}
	h.Metadata = counting
	h.Start()
	h.WaitRunning("metadata-watcher")
	managertest.Eventually(t, "pod in the metadata informer",
		func() bool { return hasKey(&store, "default/p") })
	if counting.calls.Load() == 0 {
		t.Fatal("the Manager did not use the metadata client set in h.Metadata")
	}
}

func TestErrFailsAfterTimeout(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	d := descriptor.New(
		"stuck",
		func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				<-ctx.Done()
				return nil
			}), nil
		},
	)
	rec := &recordingTB{TB: t}
	h := managertest.New(rec, "test", []descriptor.Descriptor{d})
	h.Timeout = 50 * time.Millisecond
	h.Start()
	h.WaitRunning("stuck")
	// Run has not been asked to stop, so Err must give up at the deadline.
	if err := h.Err(); err == nil {
		t.Fatal("Err returned nil while Run was still running")
	}
	if !rec.failed.Load() {
		t.Fatal("Err did not fail the test at its deadline")
	}
	h.Timeout = managertest.DefaultTimeout
	if err := h.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// recordingTB records a failure instead of failing the real test.
type recordingTB struct {
	testing.TB
	failed atomic.Bool
}

func (r *recordingTB) Error(args ...any) {
	r.failed.Store(true)
	r.TB.Log(append([]any{"(expected) "}, args...)...)
}

func TestMetadataClient(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(
		pod("a", map[string]string{"app": "x"}),
		pod("b", map[string]string{"app": "y"}),
	)
	mc := managertest.NewMetadataClient(client)
	pods := mc.Resource(podsGVR).Namespace("default")

	got, err := pods.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Name != "a" || got.Kind != "Pod" || got.APIVersion != "v1" {
		t.Errorf("Get = %s %s/%s, want v1 Pod a", got.APIVersion, got.Kind, got.Name)
	}

	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "a" {
		t.Errorf("List(app=x) = %v, want [a]", names(list.Items))
	}

	w, err := pods.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()

	patched, err := pods.Patch(
		ctx,
		"b",
		types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"app":"z"}}}`),
		metav1.PatchOptions{},
	)
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	if patched.Labels["app"] != "z" {
		t.Errorf("Patch: labels = %v, want app=z", patched.Labels)
	}
	typed, err := client.CoreV1().Pods("default").Get(ctx, "b", metav1.GetOptions{})
	if err != nil || typed.Labels["app"] != "z" {
		t.Errorf("typed Get after metadata Patch = %v, %v; want app=z", typed, err)
	}
	expectEvent(t, w, watch.Modified, "b")

	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	expectEvent(t, w, watch.Deleted, "a")
	if _, err := client.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{}); err == nil {
		t.Error("pod a still in the typed fake after a metadata Delete")
	}

	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatalf("DeleteCollection: %v", err)
	}
	if l, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("after DeleteCollection, %d pods left", len(l.Items))
	}

	custom := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	_, err = mc.Resource(custom).List(ctx, metav1.ListOptions{})
	if err == nil {
		t.Error("List of a resource the typed fake does not know: nil error, want one naming it")
	}
}

func expectEvent(t *testing.T, w watch.Interface, typ watch.EventType, name string) {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	for {
		select {
		case e := <-w.ResultChan():
			if e.Type == watch.Added {
				continue // the fake's watch starts with the objects it holds
			}
			p, ok := e.Object.(*metav1.PartialObjectMetadata)
			if e.Type != typ || !ok || p.Name != name {
				t.Fatalf(
					"watch event = %s %T %v, want %s of PartialObjectMetadata %s",
					e.Type,
					e.Object,
					e.Object,
					typ,
					name,
				)
			}
			return
		case <-timer.C:
			t.Fatalf("no %s event for %s within 10s", typ, name)
		}
	}
}

func names(items []metav1.PartialObjectMetadata) []string {
	var out []string
	for _, i := range items {
		out = append(out, i.Name)
	}
	return out
}

func TestEphemeralServingPort(t *testing.T) {
	h := managertest.New(t, "test", nil)
	h.Options.Serving = serving.Options{SecurePort: serving.PortEphemeral, DisableAuth: true}
	h.Start()
	managertest.Eventually(t, "Manager.ServingAddr",
		func() bool { return h.Manager.ServingAddr() != nil })
	if port := h.Manager.ServingAddr().(*net.TCPAddr).Port; port == 0 ||
		port == serving.DefaultSecurePort {
		t.Errorf("serving on port %d, want a kernel-picked one", port)
	}
}
