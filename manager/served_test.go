package manager_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/served"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
	"github.com/ctrlhost/ctrlhost/serving"
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
		goruntime.GC()
		goruntime.GC()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
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

// countingDiscovery counts the discovery requests for group versions and
// serves widgetsGVR once told to.
type countingDiscovery struct {
	*fakediscovery.FakeDiscovery
	mu    sync.Mutex
	asked int
	serve bool
}

func (d *countingDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList,
	error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked++
	if d.serve && gv == widgetsGVR.GroupVersion().String() {
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{
			{Name: widgetsGVR.Resource, Namespaced: true, Kind: "Widget"}}}, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
}

func (d *countingDiscovery) ServerResourcesForGroupVersionWithContext(_ context.Context,
	gv string) (*metav1.APIResourceList, error) {
	return d.ServerResourcesForGroupVersion(gv)
}

func (d *countingDiscovery) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked
}

// discoveryClientset is a fake clientset with another discovery client.
type discoveryClientset struct {
	*fake.Clientset
	disc discovery.DiscoveryInterfaces
}

func (c discoveryClientset) Discovery() discovery.DiscoveryInterfaces { return c.disc }

// While the host watches CRDs and APIServices, an idle term asks discovery
// about a resource that is not served once a minute
// (served.WatchedPollPeriod), not once a second: a resource comes with a
// change to its definition, which has it ask at once and then every second
// for served.SettlePeriod, so that a resource discovery lists a few
// seconds after its CRD changed still starts its controller within a
// second or so. (Before, a term asked every second for as long as it ran:
// two unserved group versions of KCM's built-ins made two requests a
// second on an idle cluster, found by TestLoad.)
func TestWhenServedAsksDiscoverySeldomWhileItWatchesDefinitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := fake.NewClientset()
		disc := &countingDiscovery{FakeDiscovery: cs.Discovery().(*fakediscovery.FakeDiscovery)}
		meta := metadatafake.NewSimpleMetadataClient(runtime.NewScheme())
		crds := watch.NewFake()
		for _, r := range []string{"customresourcedefinitions", "apiservices"} {
			w := watch.Interface(watch.NewFake())
			if r == "customresourcedefinitions" {
				w = crds
			}
			meta.PrependReactor("list", r, func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, &metav1.List{}, nil
			})
			meta.PrependWatchReactor(r, func(k8stesting.Action) (bool, watch.Interface, error) {
				return true, w, nil
			})
		}
		idle := descriptor.New("widget-controller",
			func(context.Context, descriptor.Context) (descriptor.Controller, error) {
				return descriptor.ControllerFunc(func(ctx context.Context) error {
					<-ctx.Done()
					return nil
				}), nil
			}).WhenServed(widgetsGVR)
		m, err := manager.NewBuilder("test").WithClient(discoveryClientset{cs, disc}, meta).
			WithOptions(manager.Options{Serving: serving.Options{SecurePort: -1}}).
			WithLogger(logr.Discard()).Register(idle).Build()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()

		const idleFor = 5 * time.Minute
		time.Sleep(idleFor) // the bubble's clock
		// One request at the start, one a minute, and at most the settle
		// period's when the definitions' first lists are taken for changes.
		most := 1 + int(idleFor/served.WatchedPollPeriod) +
			int(served.SettlePeriod/served.PollPeriod)
		if n := disc.count(); n > most {
			t.Errorf("%d discovery requests in %v of an idle term, want at most %d", n, idleFor,
				most)
		}
		if st, _ := m.Status("widget-controller"); st.Phase != manager.PhaseUnserved {
			t.Fatalf("phase %s, want %s", st.Phase, manager.PhaseUnserved)
		}

		crds.Add(&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{
			APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"}})
		time.Sleep(3 * time.Second) // discovery lags the CRD
		disc.mu.Lock()
		disc.serve = true
		disc.mu.Unlock()
		time.Sleep(served.PollPeriod + time.Millisecond)
		synctest.Wait()
		if st, _ := m.Status("widget-controller"); st.Phase != manager.PhaseRunning {
			t.Errorf("phase %s a poll period after discovery listed the resource, want %s",
				st.Phase, manager.PhaseRunning)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
