package manager_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
	"github.com/ctrlhost/ctrlhost/serving"
)

// journal records what happened, in order, across goroutines.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, fmt.Sprintf(format, args...))
}

func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.events)
}

func (j *journal) index(e string) int { return slices.Index(j.list(), e) }

// blocking is a controller that runs until its context is done.
func blocking(j *journal, name string) descriptor.Descriptor {
	return descriptor.New(name, func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		j.add("init %s", name)
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			j.add("run %s", name)
			<-ctx.Done()
			return nil
		}), nil
	})
}

func TestRunsSelectedControllersAndStops(t *testing.T) {
	j := &journal{}
	h := managertest.New(t, "test-manager", []descriptor.Descriptor{
		blocking(j, "a-controller"),
		blocking(j, "b-controller").WithAliases("b"),
		blocking(j, "c-controller").DisabledByDefault(),
		blocking(j, "d-controller"),
	})
	h.Options.Controllers = []string{"-d-controller", "*", "-b"}
	h.Start()
	h.WaitRunning("a-controller")
	for name, want := range map[string]manager.Phase{
		"b-controller": manager.PhaseDisabled, "c-controller": manager.PhaseDisabled, "d-controller": manager.PhaseDisabled,
	} {
		if st, _ := h.Manager.Status(name); st.Phase != want {
			t.Errorf("%s: phase %q, want %q", name, st.Phase, want)
		}
	}
	h.WaitHealthy("/readyz")
	if err := h.Stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st, _ := h.Manager.Status("a-controller"); st.Phase != manager.PhaseStopped || st.Starts != 1 {
		t.Errorf("after stop: %+v, want stopped after 1 start", st)
	}
	if got := j.list(); !slices.Equal(got, []string{"init a-controller", "run a-controller"}) {
		t.Errorf("journal = %v", got)
	}
}

// TestStartFirstRunsBeforeOtherInitFuncs: a StartFirst controller's Run is
// called, on its own goroutine and without the start interval's jitter,
// before any other InitFunc, whatever the registration order. In a
// synctest bubble the other InitFunc first lets every goroutine run until
// it blocks (synctest.Wait), so the journal shows whether the StartFirst
// Run had been called by then (before the fix, the jitter delayed it and
// the next InitFunc was called at once).
func TestStartFirstRunsBeforeOtherInitFuncs(t *testing.T) {
	for _, interval := range []time.Duration{0, 300 * time.Millisecond} {
		t.Run(fmt.Sprintf("start interval %v", interval), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				j := &journal{}
				called := make(chan struct{})
				user := descriptor.New("user-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
					synctest.Wait()
					j.add("init user-controller")
					close(called)
					return nil, nil
				})
				// Registered after the InitFunc it must precede.
				m, err := manager.NewBuilder("test-manager").WithClient(fake.NewClientset(), nil).
					WithOptions(manager.Options{ControllerStartInterval: interval, Serving: serving.Options{SecurePort: -1}}).
					WithLogger(logr.Discard()).Register(user, blocking(j, "token-controller").StartFirst()).Build()
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() { done <- m.Run(ctx) }()
				<-called
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				want := []string{"init token-controller", "run token-controller", "init user-controller"}
				if got := j.list(); !slices.Equal(got, want) {
					t.Errorf("journal = %v, want %v", got, want)
				}
			})
		})
	}
}

// TestStoppingTermCallsNoMoreInitFuncs: once a term is stopping, the
// InitFuncs not yet called are not called (before the fix they were called
// with a done context, and one that blocked was abandoned, failing the
// stop and keeping the lease until it expired).
func TestStoppingTermCallsNoMoreInitFuncs(t *testing.T) {
	j := &journal{}
	inFirst := make(chan struct{})
	h := managertest.New(t, "test-manager", []descriptor.Descriptor{
		descriptor.New("slow-init-controller", func(ctx context.Context, _ descriptor.Context) (descriptor.Controller, error) {
			j.add("init slow-init-controller")
			close(inFirst)
			<-ctx.Done() // the term stops while this InitFunc runs
			return nil, nil
		}),
		descriptor.New("never-controller", func(ctx context.Context, _ descriptor.Context) (descriptor.Controller, error) {
			j.add("init never-controller")
			<-make(chan struct{}) // blocks for good: it must not be called
			return nil, nil
		}),
	})
	h.Start()
	recv(t, "the first InitFunc", inFirst)
	if err := h.Stop(); err != nil {
		t.Fatalf("Run = %v, want a clean stop", err)
	}
	if got := j.list(); !slices.Equal(got, []string{"init slow-init-controller"}) {
		t.Errorf("journal = %v, want only the first InitFunc called", got)
	}
	if st, _ := h.Manager.Status("never-controller"); st.Phase != manager.PhaseWaiting {
		t.Errorf("never-controller: %+v, want still waiting", st)
	}
}

// TestInformersStartAfterEveryInitFunc: no informer lists or watches before
// every InitFunc returned, and InformersStarted closes only after Start.
func TestInformersStartAfterEveryInitFunc(t *testing.T) {
	j := &journal{}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	synced := make(chan int, 1)
	var ds []descriptor.Descriptor
	for _, name := range []string{"a-controller", "b-controller", "c-controller"} {
		ds = append(ds, descriptor.New(name, func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			pods := cc.InformerFactory.Core().V1().Pods()
			informer := pods.Informer()
			select {
			case <-cc.InformersStarted:
				j.add("InformersStarted closed during init of %s", name)
			default:
			}
			j.add("init %s", name)
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				<-cc.InformersStarted
				j.add("informers started seen by %s", name)
				if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
					return errors.New("cache did not sync")
				}
				if name == "a-controller" {
					list, _ := pods.Lister().List(labels.Everything())
					synced <- len(list)
				}
				<-ctx.Done()
				return nil
			}), nil
		}))
	}
	h := managertest.New(t, "test-manager", ds, pod)
	h.Client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		j.add("list pods")
		return false, nil, nil
	})
	h.Start()
	if n := recv(t, "the lister's count", synced); n != 1 {
		t.Errorf("lister saw %d pods, want 1", n)
	}
	h.WaitHealthy("/readyz")
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	events := j.list()
	list := j.index("list pods")
	if list < 0 {
		t.Fatalf("the informer never listed: %v", events)
	}
	for _, name := range []string{"a-controller", "b-controller", "c-controller"} {
		if i := j.index("init " + name); i < 0 || i > list {
			t.Errorf("init %s at %d, list at %d: %v", name, i, list, events)
		}
		if i := j.index("informers started seen by " + name); i < 0 {
			t.Errorf("%s never saw InformersStarted: %v", name, events)
		}
	}
	for _, e := range events {
		if strings.HasPrefix(e, "InformersStarted closed during init") {
			t.Error(e)
		}
	}
}

func TestSkippingByFeatureGateAndCloud(t *testing.T) {
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		"Alpha": {Default: false, PreRelease: featuregate.Alpha},
		"Beta":  {Default: true, PreRelease: featuregate.Beta},
	}); err != nil {
		t.Fatal(err)
	}
	j := &journal{}
	tests := []struct {
		cloudProvider string
		inProcess     bool // WithInProcessCloudProvider
		wantPhase     map[string]manager.Phase
		wantReason    string
	}{
		{"", false, map[string]manager.Phase{"gated-off": manager.PhaseSkipped, "gated-on": manager.PhaseRunning, "cloud-loop": manager.PhaseSkipped}, "this program runs no in-process cloud provider"},
		{"external", false, map[string]manager.Phase{"gated-off": manager.PhaseSkipped, "gated-on": manager.PhaseRunning, "cloud-loop": manager.PhaseSkipped}, "this program runs no in-process cloud provider"},
		{"", true, map[string]manager.Phase{"gated-off": manager.PhaseSkipped, "gated-on": manager.PhaseRunning, "cloud-loop": manager.PhaseSkipped}, `--cloud-provider is empty or "external"`},
		{"external", true, map[string]manager.Phase{"gated-off": manager.PhaseSkipped, "gated-on": manager.PhaseRunning, "cloud-loop": manager.PhaseSkipped}, `--cloud-provider is empty or "external"`},
		{"my-cloud", true, map[string]manager.Phase{"gated-off": manager.PhaseSkipped, "gated-on": manager.PhaseRunning, "cloud-loop": manager.PhaseRunning}, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("cloud-provider=%s,in-process=%v", tt.cloudProvider, tt.inProcess), func(t *testing.T) {
			h := managertest.New(t, "test-manager", []descriptor.Descriptor{
				blocking(j, "gated-off").WithFeatureGates("Beta", "Alpha"),
				blocking(j, "gated-on").WithFeatureGates("Beta"),
				blocking(j, "cloud-loop").CloudProvider(),
			})
			h.Options.CloudProvider = tt.cloudProvider
			h.Builder.WithFeatureGate(fg)
			if tt.inProcess {
				h.Builder.WithInProcessCloudProvider()
			}
			h.Start()
			h.WaitRunning("gated-on")
			h.WaitHealthy("/readyz")
			for name, want := range tt.wantPhase {
				if want == manager.PhaseRunning {
					h.WaitRunning(name)
					continue
				}
				if st, _ := h.Manager.Status(name); st.Phase != want {
					t.Errorf("%s: %+v, want %s", name, st, want)
				}
			}
			_, body := h.Get("/readyz?verbose")
			if !strings.Contains(body, "[+]gated-off ok: skipped: feature gate Alpha is disabled") {
				t.Errorf("/readyz?verbose does not say why gated-off is skipped:\n%s", body)
			}
			if tt.wantReason != "" && !strings.Contains(body, "[+]cloud-loop ok: skipped: cloud-provider loop") || !strings.Contains(body, tt.wantReason) {
				t.Errorf("/readyz?verbose does not say why cloud-loop is skipped:\n%s", body)
			}
			if err := h.Stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

type unhealthy struct{ err error }

func (u *unhealthy) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (u *unhealthy) HealthCheck(*http.Request) error {
	return u.err
}

func TestPerControllerHealth(t *testing.T) {
	sick := &unhealthy{err: errors.New("queue is stuck")}
	h := managertest.New(t, "test-manager", []descriptor.Descriptor{
		descriptor.New("sick-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) { return sick, nil }),
		blocking(&journal{}, "fine-controller"),
	}).Start()
	h.WaitRunning("sick-controller", "fine-controller")
	for _, ep := range []string{"/healthz", "/livez", "/readyz"} {
		code, body := h.Get(ep + "?verbose")
		if code != http.StatusInternalServerError {
			t.Errorf("%s: code %d, want 500", ep, code)
		}
		for _, want := range []string{"[-]sick-controller failed: queue is stuck", "[+]fine-controller ok", "[+]ping ok"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s?verbose lacks %q:\n%s", ep, want, body)
			}
		}
		code, body = h.Get(ep)
		if code != http.StatusInternalServerError || !strings.Contains(body, "[-]sick-controller failed: reason withheld") {
			t.Errorf("%s: %d %q, want the reason withheld", ep, code, body)
		}
		if code, _ := h.Get(ep + "?exclude=sick-controller"); code != http.StatusOK {
			t.Errorf("%s?exclude=sick-controller: %d, want 200", ep, code)
		}
	}
	if code, body := h.Get("/healthz/fine-controller"); code != http.StatusOK {
		t.Errorf("/healthz/fine-controller: %d %s", code, body)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestReadyzNeedsInformerSync(t *testing.T) {
	release := make(chan struct{})
	h := managertest.New(t, "test-manager", []descriptor.Descriptor{
		descriptor.New("pods-controller", func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			cc.InformerFactory.Core().V1().Pods().Informer()
			return descriptor.ControllerFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
		}),
	})
	listed := make(chan struct{}, 1)
	h.Client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case listed <- struct{}{}:
		default:
		}
		<-release // hold the initial list until the test has looked
		return false, nil, nil
	})
	h.Start()
	h.WaitRunning("pods-controller")
	recv(t, "the initial list", listed)
	code, body := h.Get("/readyz?verbose")
	if code != http.StatusInternalServerError || !strings.Contains(body, "[-]informer-sync failed: term main: informer caches not synced") {
		t.Errorf("/readyz before sync: %d\n%s", code, body)
	}
	if code, _ := h.Get("/livez"); code != http.StatusOK {
		t.Errorf("/livez must not depend on informer sync, got %d", code)
	}
	close(release)
	h.WaitHealthy("/readyz")
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestInitFuncErrorStopsTheTerm(t *testing.T) {
	j := &journal{}
	h := managertest.New(t, "test-manager", []descriptor.Descriptor{
		blocking(j, "a-controller"),
		descriptor.New("broken-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return nil, errors.New("no credentials")
		}),
		blocking(j, "c-controller"),
	}).Start()
	err := h.Err()
	if !errors.Is(err, manager.ErrControllerFailed) || !strings.Contains(err.Error(), `"broken-controller"`) || !strings.Contains(err.Error(), "no credentials") {
		t.Fatalf("Run error = %v, want it to name broken-controller and wrap the cause", err)
	}
	// a-controller was built, so it gets its Run call (with a done context)
	// to release what it holds; c-controller is never built.
	if got := j.list(); !slices.Equal(got, []string{"init a-controller", "run a-controller"}) {
		t.Errorf("after a failed InitFunc nothing else may be built, and built controllers are run once: %v", got)
	}
	if st, _ := h.Manager.Status("a-controller"); st.Phase != manager.PhaseStopped {
		t.Errorf("a-controller: %+v, want stopped", st)
	}
	if st, _ := h.Manager.Status("broken-controller"); st.Phase != manager.PhaseFailed {
		t.Errorf("broken-controller: %+v", st)
	}
}

func TestNilControllerIsNotStarted(t *testing.T) {
	h := managertest.New(t, "test-manager", []descriptor.Descriptor{
		descriptor.New("absent-api-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) { return nil, nil }),
		blocking(&journal{}, "a-controller"),
	}).Start()
	h.WaitFor("absent-api-controller", manager.PhaseNotStarted)
	h.WaitHealthy("/readyz")
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestPanicsAreRecovered(t *testing.T) {
	tests := []struct {
		name  string
		init  descriptor.InitFunc
		where string
	}{
		{"panic in InitFunc", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			panic("boom in init")
		}, "InitFunc panicked: boom in init"},
		{"panic in Run", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(func(context.Context) error { panic("boom in run") }), nil
		}, "Run panicked: boom in run"},
		{"Run returns an error", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(func(context.Context) error { return errors.New("lost my marbles") }), nil
		}, "Run failed: lost my marbles"},
		{"InitFunc returns an error", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return nil, errors.New("no informer for that")
		}, "InitFunc failed: no informer for that"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := managertest.New(t, "test-manager", []descriptor.Descriptor{
				descriptor.New("faulty-controller", tt.init),
				blocking(&journal{}, "bystander-controller"),
			}).Start()
			err := h.Err()
			if !errors.Is(err, manager.ErrControllerFailed) || !strings.Contains(err.Error(), tt.where) {
				t.Fatalf("Run error = %v, want ErrControllerFailed and %q", err, tt.where)
			}
			// Each said once: the controller's name, and what failed.
			for _, once := range []string{"faulty-controller", tt.where} {
				if n := strings.Count(err.Error(), once); n != 1 {
					t.Errorf("Run error %q says %q %d times, want once", err, once, n)
				}
			}
			var ce *manager.ControllerError
			if !errors.As(err, &ce) || ce.Controller != "faulty-controller" {
				t.Errorf("Run error %v is not a ControllerError of faulty-controller", err)
			}
			code, body := h.Get("/healthz?verbose")
			if code != http.StatusInternalServerError || !strings.Contains(body, "[-]faulty-controller failed: ") || !strings.Contains(body, tt.where) {
				t.Errorf("/healthz after the failure: %d\n%s", code, body)
			}
		})
	}
}

func TestShutdownTimeoutNamesStuckController(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := managertest.New(t, "test-manager", []descriptor.Descriptor{
		descriptor.New("stuck-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(func(context.Context) error { <-release; return nil }), nil
		}),
		blocking(&journal{}, "polite-controller"),
	})
	h.Options.ControllerShutdownTimeout = 50 * time.Millisecond
	h.Start()
	h.WaitRunning("stuck-controller", "polite-controller")
	err := h.Stop()
	if !errors.Is(err, manager.ErrShutdownTimeout) || !strings.Contains(err.Error(), "stuck-controller") || strings.Contains(err.Error(), "polite-controller") {
		t.Fatalf("Run error = %v, want ErrShutdownTimeout naming only stuck-controller", err)
	}
}

func TestControllerLoggerIsNamed(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{})
	h := managertest.New(t, "test-manager", []descriptor.Descriptor{
		descriptor.New("chatty-controller", func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			logr.FromContextOrDiscard(ctx).Info("hello from init", "name", cc.Name)
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				logr.FromContextOrDiscard(ctx).Info("hello from run")
				<-ctx.Done()
				return nil
			}), nil
		}),
	})
	h.Builder.WithLogger(logger)
	h.Start()
	h.WaitRunning("chatty-controller")
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"hello from init", "hello from run"} {
		found := false
		for _, l := range lines {
			if strings.Contains(l, want) {
				found = true
				if !strings.HasPrefix(l, "chatty-controller ") {
					t.Errorf("%q logged without the controller's name: %q", want, l)
				}
			}
		}
		if !found {
			t.Errorf("%q not logged; lines: %q", want, lines)
		}
	}
}

type debuggable struct{}

func (debuggable) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (debuggable) DebuggingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "debug page at "+r.URL.Path) })
}

func TestDebugHandlerMounted(t *testing.T) {
	h := managertest.New(t, "test-manager", []descriptor.Descriptor{
		descriptor.New("debug-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) { return debuggable{}, nil }).WithAliases("debug"),
		blocking(&journal{}, "plain-controller"),
	}).Start()
	h.WaitRunning("debug-controller", "plain-controller")
	tests := []struct {
		path string
		code int
		body string
	}{
		{"/debug/controllers/debug-controller/", 200, "debug page at /"},
		{"/debug/controllers/debug-controller/queue", 200, "debug page at /queue"},
		// KCM before 1.28 served pages under the short names that are now
		// aliases (/debug/controllers/garbagecollector/graph).
		{"/debug/controllers/debug/queue", 200, "debug page at /queue"},
		{"/debug/controllers/plain-controller/", 404, ""},
		{"/debug/controllers/nobody/", 404, ""},
		{"/debug/controllers/", 200, "/debug/controllers/debug-controller/"},
	}
	for _, tt := range tests {
		code, body := h.Get(tt.path)
		if code != tt.code || !strings.Contains(body, tt.body) {
			t.Errorf("GET %s = %d %q, want %d %q", tt.path, code, body, tt.code, tt.body)
		}
	}
	if _, body := h.Get("/debug/controllers/"); strings.Contains(body, "plain-controller") {
		t.Errorf("index lists a controller without a debug handler:\n%s", body)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if code, _ := h.Get("/debug/controllers/debug-controller/"); code != http.StatusServiceUnavailable {
		t.Errorf("after stop: %d, want 503", code)
	}
}

func TestEventRecorderSourceIsControllerName(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	h := managertest.New(t, "test-manager", []descriptor.Descriptor{
		descriptor.New("eventful-controller", func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			cc.EventRecorder.Event(pod, corev1.EventTypeNormal, "Hello", "from a controller")
			return descriptor.ControllerFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
		}),
	}, pod).Start()
	events := waitEvents(t, h, 1)
	if events[0].Source.Component != "eventful-controller" || events[0].Reason != "Hello" {
		t.Fatalf("events = %+v", events)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestEventRecorderSourceAsDeclared: a descriptor's WithEventSource names
// the events' source component (KCM's endpoints controller records as
// "endpoint-controller", not under its canonical name).
func TestEventRecorderSourceAsDeclared(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	h := managertest.New(t, "test-manager", []descriptor.Descriptor{
		descriptor.New("endpoints-controller", func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			cc.EventRecorder.Event(pod, corev1.EventTypeNormal, "Hello", "from a controller")
			return descriptor.ControllerFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
		}).WithEventSource("endpoint-controller"),
	}, pod).Start()
	if events := waitEvents(t, h, 1); events[0].Source.Component != "endpoint-controller" {
		t.Fatalf("source %q, want the declared endpoint-controller", events[0].Source.Component)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// waitEvents waits for n events in namespace ns and returns them.
func waitEvents(t *testing.T, h *managertest.Harness, n int) []corev1.Event {
	t.Helper()
	var events *corev1.EventList
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, managertest.DefaultTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		events, err = h.Client.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
		return err == nil && len(events.Items) >= n, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != n {
		t.Fatalf("%d events, want %d: %+v", len(events.Items), n, events.Items)
	}
	return events.Items
}

// TestQueuesRouteKeysBetweenControllers: a controller hands keys to
// another of its term by name or alias; keys sent before the receiver
// handles them are held for it; an unknown name is an error naming the
// term's controllers.
func TestQueuesRouteKeysBetweenControllers(t *testing.T) {
	got := make(chan string, 4)
	sendErr := make(chan error, 1)
	h := managertest.New(t, "queues-manager", []descriptor.Descriptor{
		descriptor.New("sender-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			// Sent before the receiver's InitFunc ran.
			if err := cc.Queues.Send("receiver", "ns/early"); err != nil {
				return nil, err
			}
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				if err := cc.Queues.Send("receiver-controller", "ns/late"); err != nil {
					return err
				}
				sendErr <- cc.Queues.Send("nobody", "ns/x")
				<-ctx.Done()
				return nil
			}), nil
		}),
		descriptor.New("receiver-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
			cc.Queues.Handle(func(key string) { got <- key })
			return descriptor.ControllerFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
		}).WithAliases("receiver"),
	})
	h.Start()
	for _, want := range []string{"ns/early", "ns/late"} {
		if k := recv(t, "a routed key", got); k != want {
			t.Errorf("received %q, want %q", k, want)
		}
	}
	if err := recv(t, "the send to an unknown controller", sendErr); err == nil ||
		!strings.Contains(err.Error(), `"nobody"`) || !strings.Contains(err.Error(), "receiver-controller") {
		t.Errorf("Send to an unknown controller: %v, want an error naming it and the term's controllers", err)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
