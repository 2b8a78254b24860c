package manager_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

var widgetsGVR = schema.GroupVersionResource{
	Group: "example.com", Version: "v1", Resource: "widgets",
}

func widget(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	u.SetNamespace("default")
	u.SetName(name)
	return u
}

// servedRecorder is a WhenServed controller that records the informers its
// InitFunc made and the widgetsGVR its handler saw.
type servedRecorder struct {
	mu        sync.Mutex
	informers []cache.SharedIndexInformer
	synced    []bool         // whether each start's informer had synced when its InitFunc got it
	seen      map[string]int // widget name → how many starts saw it
}

func (r *servedRecorder) descriptor() descriptor.Descriptor {
	init := func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		inf := cc.DynamicInformerFactory.ForResource(widgetsGVR).Informer()
		r.mu.Lock()
		r.informers = append(r.informers, inf)
		r.synced = append(r.synced, inf.HasSynced())
		r.mu.Unlock()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.seen[obj.(*unstructured.Unstructured).GetName()]++
		}}); err != nil {
			return nil, err
		}
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}), nil
	}
	return descriptor.New("widget-controller", init).WhenServed(widgetsGVR)
}

func (r *servedRecorder) saw(name string, times int) func() bool {
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.seen[name] == times
	}
}

func (r *servedRecorder) informer(i int) cache.SharedIndexInformer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.informers) {
		return nil
	}
	return r.informers[i]
}

// A WhenServed controller waits, ready, while its resource is not served;
// starts when it is; stops, with its informer, when it goes; and starts
// again, on a new informer, when it is back.
func TestWhenServedControllerFollowsItsResource(t *testing.T) {
	rec := &servedRecorder{seen: map[string]int{}}
	h := managertest.NewAPI(t, "test", []descriptor.Descriptor{rec.descriptor()}).Start()
	st := h.WaitFor("widget-controller", manager.PhaseUnserved)
	if want := "not served: example.com/v1, Resource=widgets"; st.Reason != want {
		t.Errorf("unserved reason = %q, want %q", st.Reason, want)
	}
	h.WaitHealthy("/readyz")
	_, body := h.Get("/readyz?verbose")
	if !strings.Contains(body, "widget-controller ok: not served: ") {
		t.Errorf("/readyz?verbose does not say what the controller waits for:\n%s", body)
	}

	h.API.Serve(widgetsGVR, "Widget")
	if err := h.API.Create(widget("a")); err != nil {
		t.Fatal(err)
	}
	h.WaitRunning("widget-controller")
	managertest.Eventually(t, "the first start sees widget a", rec.saw("a", 1))
	h.WaitHealthy("/readyz")

	h.API.Remove(widgetsGVR)
	h.WaitFor("widget-controller", manager.PhaseUnserved)
	if inf := rec.informer(0); inf == nil || !inf.IsStopped() {
		t.Error("the controller is unserved again, but its first start's informer runs")
	}

	h.API.Serve(widgetsGVR, "Widget")
	if err := h.API.Create(widget("b")); err != nil {
		t.Fatal(err)
	}
	h.WaitRunning("widget-controller")
	managertest.Eventually(t, "the second start sees widget b", rec.saw("b", 1))
	if st, _ := h.Manager.Status("widget-controller"); st.Starts != 2 {
		t.Errorf("Starts = %d, want 2", st.Starts)
	}
	if sameCache(rec.informer(1), rec.informer(0)) {
		t.Error("the second start reused the stopped informer")
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if inf := rec.informer(1); !inf.IsStopped() {
		t.Error("the second start's informer outlived Run")
	}
}

// TestWarmStandbyKeepsServedResourcesWarm: a follower under warm standby
// keeps warm the declared informers of a WhenServed controller once its
// resources are served (it asks discovery while it follows), and the
// controller it starts as leader gets that informer synced, without a new
// LIST.
func TestWarmStandbyKeepsServedResourcesWarm(t *testing.T) {
	recA, recB := &servedRecorder{seen: map[string]int{}}, &servedRecorder{seen: map[string]int{}}
	a := managertest.NewAPI(t, "warm-served",
		[]descriptor.Descriptor{recA.descriptor().WithInformers(widgetsGVR)})
	a.Options = fastElection("a")
	a.Start()
	a.WaitFor("widget-controller", manager.PhaseUnserved)
	// An informer's initial list is a LIST, or a WATCH streaming it.
	var lists atomic.Int32
	a.API.Refuse(func(r managertest.Request) error {
		if (r.Verb == "list" || r.Verb == "watch") && r.Resource == widgetsGVR {
			lists.Add(1)
		}
		return nil
	})

	b := managertest.NewAPI(t, "warm-served",
		[]descriptor.Descriptor{recB.descriptor().WithInformers(widgetsGVR)})
	b.API = a.API
	b.Options = fastElection("b")
	b.Options.WarmStandby = true
	b.Start()
	managertest.Eventually(t, "b follows a", func() bool {
		l, _ := b.Manager.Leader()
		return l == "a"
	})
	if n := lists.Load(); n != 0 {
		t.Fatalf("widgets listed %d times while not served", n)
	}

	a.API.Serve(widgetsGVR, "Widget")
	if err := a.API.Create(widget("a")); err != nil {
		t.Fatal(err)
	}
	a.WaitRunning("widget-controller")
	managertest.Eventually(t, "a's controller and b's warm set list widgets",
		func() bool { return lists.Load() == 2 })
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	b.WaitRunning("widget-controller")
	managertest.Eventually(t, "b's controller sees widget a", recB.saw("a", 1))
	recB.mu.Lock()
	synced := recB.synced
	recB.mu.Unlock()
	if len(synced) != 1 || !synced[0] {
		t.Errorf("b's controller got a cold informer (synced at InitFunc: %v), "+
			"want the warm one", synced)
	}
	if n := lists.Load(); n != 2 {
		t.Errorf("widgets listed %d times, want 2 (a's start, b's warm set)", n)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
}

// StartFirst cannot wait for its resources: Build says so.
func TestWhenServedStartFirstRejected(t *testing.T) {
	noop := func(context.Context, descriptor.Context) (descriptor.Controller, error) {
		return nil, nil
	}
	d := descriptor.New("first", noop).StartFirst().WhenServed(widgetsGVR)
	_, err := manager.NewBuilder("test").Register(d).Build()
	const want = "WhenServed and StartFirst exclude each other"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Build error = %v, want one naming WhenServed and StartFirst", err)
	}
}

// BenchmarkServedUnitFreesItsCache measures what a WhenServed controller's
// informers hold while it runs over 10,000 custom objects, and what is left
// once it stopped: it waits for widgets and for flags, and flags go while
// the widgets stay (in the in-memory API server's store, which both
// measurements include).
func BenchmarkServedUnitFreesItsCache(b *testing.B) {
	const objects = 10000
	flags := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "flags"}
	var inf atomic.Pointer[cache.SharedIndexInformer]
	init := func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		i := cc.DynamicInformerFactory.ForResource(widgetsGVR).Informer()
		inf.Store(&i)
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}), nil
	}
	d := descriptor.New("widget-cache", init).WhenServed(widgetsGVR, flags)
	heap := func() float64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapAlloc) / (1 << 20)
	}
	for range b.N {
		h := managertest.NewAPI(b, "bench", []descriptor.Descriptor{d})
		h.API.Serve(widgetsGVR, "Widget")
		for i := range objects {
			w := widget(fmt.Sprintf("w-%05d", i))
			w.SetLabels(map[string]string{"app": "bench", "shard": fmt.Sprint(i % 16)})
			payload := strings.Repeat("x", 200)
			err := unstructured.SetNestedField(w.Object, payload, "spec", "payload")
			if err != nil {
				b.Fatal(err)
			}
			if err := h.API.Create(w); err != nil {
				b.Fatal(err)
			}
		}
		h.Start()
		before := heap()
		h.API.Serve(flags, "Flag")
		h.WaitRunning("widget-cache")
		h.WaitHealthy("/readyz")
		running := heap()
		h.API.Remove(flags)
		h.WaitFor("widget-cache", manager.PhaseUnserved)
		if !(*inf.Load()).IsStopped() {
			b.Fatal("the controller is unserved, but its informer runs")
		}
		inf.Store(nil)
		stopped := heap()
		if err := h.Stop(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(running-before, "cache-MiB")
		b.ReportMetric(running-stopped, "freed-MiB")
	}
}
