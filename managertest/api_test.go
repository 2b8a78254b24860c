package managertest_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/listers"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/managertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// Widget is a custom resource without generated code.
type Widget struct {
	metav1.TypeMeta   `             json:",inline"`
	metav1.ObjectMeta `             json:"metadata,omitempty"`
	Spec              WidgetSpec   `json:"spec"`
	Status            WidgetStatus `json:"status,omitempty"`
}

type WidgetSpec struct {
	Size int `json:"size"`
}

type WidgetStatus struct {
	Seen int `json:"seen,omitempty"`
}

func (w *Widget) DeepCopyObject() runtime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// A controller reads a custom resource through a typed informer of the
// term (informers.Custom, no generated code) and writes its status and an
// owned ConfigMap through the term's dynamic and typed clients, all over
// the in-memory API server: one store, real resourceVersions, the status
// subresource apart from the spec.
func TestAPIHarnessServesCustomResources(t *testing.T) {
	reconciled := make(chan string, 10)
	d := descriptor.New(
		"widget-controller",
		func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			inf, err := informers.Custom[Widget](cc.Informers, widgets)
			if err != nil {
				return nil, err
			}
			lister := listers.New[*Widget](inf.GetIndexer(), widgets.GroupResource())
			dyn, err := cc.ClientBuilder.DynamicClient(cc.Name)
			if err != nil {
				return nil, err
			}
			kube, err := cc.ClientBuilder.Client(cc.Name)
			if err != nil {
				return nil, err
			}
			keys := make(chan string, 10)
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc: func(obj any) {
					k, _ := cache.MetaNamespaceKeyFunc(obj)
					keys <- k
				},
			}); err != nil {
				return nil, err
			}
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				for {
					select {
					case <-ctx.Done():
						return nil
					case k := <-keys:
						ns, name, _ := cache.SplitMetaNamespaceKey(k)
						w, err := listers.NewNamespaced(lister, ns).Get(name)
						if err != nil {
							return err
						}
						cm := &corev1.ConfigMap{
							ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
							Data:       map[string]string{"size": fmt.Sprint(w.Spec.Size)},
						}
						cms := kube.CoreV1().ConfigMaps(ns)
						if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
							return err
						}
						u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w)
						if err != nil {
							return err
						}
						obj := &unstructured.Unstructured{Object: u}
						_ = unstructured.SetNestedField(
							obj.Object,
							int64(w.Spec.Size),
							"status",
							"seen",
						)
						_, err = dyn.Resource(widgets).Namespace(ns).UpdateStatus(ctx, obj,
							metav1.UpdateOptions{})
						if err != nil {
							return err
						}
						reconciled <- k
					}
				}
			}), nil
		},
	)
	h := managertest.NewAPI(t, "widget-manager", []descriptor.Descriptor{d})
	h.API.Serve(widgets, "Widget")
	seeded := widget("w")
	seeded.Spec.Size = 3
	if err := h.API.Create(seeded); err != nil {
		t.Fatal(err)
	}
	h.Start()
	h.WaitRunning("widget-controller")
	select {
	case k := <-reconciled:
		if k != "ns/w" {
			t.Errorf("reconciled %q", k)
		}
	case <-time.After(managertest.DefaultTimeout):
		t.Fatal("never reconciled")
	}
	w := h.API.Get(widgets, "ns", "w")
	if seen, _, _ := unstructured.NestedInt64(w.Object, "status", "seen"); seen != 3 {
		t.Errorf("status.seen = %d, want 3", seen)
	}
	if gen := w.GetGeneration(); gen != 1 {
		t.Errorf("generation after a status update = %d, want 1", gen)
	}
	cm, err := h.API.Kube().
		CoreV1().
		ConfigMaps("ns").
		Get(context.Background(), "w", metav1.GetOptions{})
	if err != nil || cm.Data["size"] != "3" {
		t.Errorf("owned ConfigMap: %v, %v", cm, err)
	}
	// A stale update is a conflict, as on the API server.
	stale := w.DeepCopy()
	_ = unstructured.SetNestedField(w.Object, int64(4), "spec", "size")
	inNS := h.API.Dynamic().Resource(widgets).Namespace("ns")
	if _, err := inNS.Update(context.Background(), w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(stale.Object, int64(5), "spec", "size")
	_, err = inNS.Update(context.Background(), stale, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("stale update: %v, want Conflict", err)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// The staleness guard works over the in-memory API server: every sync
// that follows a write reads the Widget at that write's resourceVersion or
// newer, although each write requeues the key at once (before the
// informer can have seen it). So no increment of status.seen is lost.
func TestStalenessGuardWorksUnderTheAPIHarness(t *testing.T) {
	const writes = 20
	var mu sync.Mutex
	lastWritten, staleReads := int64(0), 0
	done := make(chan struct{})
	finish := sync.OnceFunc(func() { close(done) })
	d := descriptor.New(
		"counter",
		func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			inf, err := informers.Custom[Widget](cc.Informers, widgets)
			if err != nil {
				return nil, err
			}
			lister := listers.New[*Widget](inf.GetIndexer(), widgets.GroupResource())
			dyn, err := cc.ClientBuilder.DynamicClient(cc.Name)
			if err != nil {
				return nil, err
			}
			var loop *workloop.Loop
			loop = workloop.New(cc.Name, func(ctx context.Context, key string) error {
				w, err := listers.NewNamespaced(lister, "ns").Get("w")
				if err != nil {
					return err
				}
				rv, _ := strconv.ParseInt(w.ResourceVersion, 10, 64)
				mu.Lock()
				if rv < lastWritten {
					staleReads++
				}
				mu.Unlock()
				if w.Status.Seen == writes {
					finish()
					return nil
				}
				w.Status.Seen++
				out, err := workloop.Writer{Client: dyn, FieldManager: cc.Name, Loop: loop}.
					ApplyStatus(ctx, widgets, w, key)
				if err != nil {
					return err
				}
				mu.Lock()
				lastWritten, _ = strconv.ParseInt(out.GetResourceVersion(), 10, 64)
				mu.Unlock()
				loop.Add(key) // at once: the informer has not seen the write yet
				return nil
			}, workloop.Options{})
			return loop, loop.Watch(inf, workloop.EnqueueKey())
		},
	)
	h := managertest.NewAPI(t, "counter-manager", []descriptor.Descriptor{d})
	h.API.Serve(widgets, "Widget")
	if err := h.API.Create(widget("w")); err != nil {
		t.Fatal(err)
	}
	h.Start()
	select {
	case <-done:
	case <-time.After(managertest.DefaultTimeout):
		t.Fatal("the counter never reached its count")
	}
	mu.Lock()
	if staleReads > 0 {
		t.Errorf("%d syncs read the Widget older than the loop's last write", staleReads)
	}
	mu.Unlock()
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
