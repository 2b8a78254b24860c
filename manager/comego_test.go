package manager_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// The tests of this file are about controllers that come and go in a
// running term (SetControllers, WhenServed) where they meet shared
// informers, indexes, warm standby and the term's queues.

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// byDataIndex indexes a ConfigMap by the keys of its data.
func byDataIndex(obj any) ([]string, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, nil
	}
	var keys []string
	for k := range cm.Data {
		keys = append(keys, k)
	}
	return keys, nil
}

// holder is a controller that takes the shared informer of every
// ConfigMap and runs until told to stop.
func holder(name string) descriptor.Descriptor {
	return descriptor.New(name, func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		cc.InformerFactory.Core().V1().ConfigMaps().Informer()
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}), nil
	})
}

// indexer is a controller that adds an index of its own to the shared
// informer of every ConfigMap, with client-go's AddIndexers, at each start.
func indexer(name string) descriptor.Descriptor {
	return descriptor.New(name, func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		inf := cc.InformerFactory.Core().V1().ConfigMaps().Informer()
		if err := inf.AddIndexers(cache.Indexers{"by-data": byDataIndex}); err != nil {
			return nil, err
		}
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}), nil
	})
}

// A controller that adds an index to an informer it shares starts again
// after it stopped, whether SetControllers or discovery stopped it: its
// index is shared with its earlier start (the index stays on the
// informer, which client-go cannot drop an index from), not refused as a
// second index of that name.
func TestAnIndexingControllerStartsAgain(t *testing.T) {
	t.Run("SetControllers", func(t *testing.T) {
		h := managertest.New(t, "test", []descriptor.Descriptor{holder("a-controller"),
			indexer("i-controller")}).Start()
		h.WaitRunning("a-controller", "i-controller")
		for round := range 2 {
			if err := h.Manager.SetControllers([]string{"*", "-i-controller"}); err != nil {
				t.Fatal(err)
			}
			h.WaitFor("i-controller", manager.PhaseDisabled)
			if err := h.Manager.SetControllers([]string{"*"}); err != nil {
				t.Fatal(err)
			}
			st := h.WaitFor("i-controller", manager.PhaseRunning, manager.PhaseFailed)
			if st.Phase != manager.PhaseRunning || st.Starts != round+2 {
				t.Fatalf("round %d: i-controller %s (starts %d, err %v), want running again",
					round, st.Phase, st.Starts, st.Err)
			}
		}
		if err := h.Stop(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("WhenServed", func(t *testing.T) {
		h := managertest.NewAPI(t, "test", []descriptor.Descriptor{holder("a-controller"),
			indexer("i-controller").WhenServed(widgetsGVR)}).Start()
		h.WaitRunning("a-controller")
		for round := range 2 {
			h.API.Serve(widgetsGVR, "Widget")
			st := h.WaitFor("i-controller", manager.PhaseRunning, manager.PhaseFailed)
			if st.Phase != manager.PhaseRunning || st.Starts != round+1 {
				t.Fatalf("round %d: i-controller %s (starts %d, err %v), want running",
					round, st.Phase, st.Starts, st.Err)
			}
			h.API.Remove(widgetsGVR)
			h.WaitFor("i-controller", manager.PhaseUnserved)
		}
		if err := h.Stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// Two indexes of one name and different functions on a shared informer
// are refused, with an error naming the index and what to do.
func TestAnIndexNameMeansOneFunction(t *testing.T) {
	other := descriptor.New("j-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		inf := cc.InformerFactory.Core().V1().ConfigMaps().Informer()
		byName := func(obj any) ([]string, error) { return []string{obj.(*corev1.ConfigMap).Name}, nil }
		return nil, inf.GetIndexer().AddIndexers(cache.Indexers{"by-data": byName})
	})
	h := managertest.New(t, "test", []descriptor.Descriptor{indexer("i-controller"), other})
	h.Options.Controllers = []string{"i-controller"}
	h.Start()
	h.WaitRunning("i-controller")
	if err := h.Manager.SetControllers([]string{"*"}); err != nil {
		t.Fatal(err)
	}
	st := h.WaitFor("j-controller", manager.PhaseFailed)
	for _, want := range []string{`index "by-data"`, "another function", "a name of its own"} {
		if st.Err == nil || !strings.Contains(st.Err.Error(), want) {
			t.Errorf("j-controller failed with %v, want an error saying %q", st.Err, want)
		}
	}
	if err := h.Err(); !errors.Is(err, manager.ErrControllerFailed) {
		t.Errorf("Run returned %v, want j-controller's failure", err)
	}
}

// podReader is a controller that reads pods, declaring what fields (none:
// it declares nothing at all, and reads pods whole); it records the pod
// informer each start got.
type podReader struct {
	mu        sync.Mutex
	informers map[string][]cache.SharedIndexInformer
}

func (p *podReader) got(name string, i int) cache.SharedIndexInformer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= len(p.informers[name]) {
		return nil
	}
	return p.informers[name][i]
}

func (p *podReader) descriptor(name string, fields ...string) descriptor.Descriptor {
	d := descriptor.New(name, func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		inf := cc.InformerFactory.Core().V1().Pods().Informer()
		p.mu.Lock()
		p.informers[name] = append(p.informers[name], inf)
		p.mu.Unlock()
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}), nil
	})
	if fields != nil {
		d = d.WithInformers(podsGVR).WithReads(podsGVR, fields...)
	}
	return d
}

func somePods(n int) []runtime.Object {
	var out []runtime.Object
	for i := range n {
		out = append(out, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("p%d", i), Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "n"}})
	}
	return out
}

// Under warm standby, a term with a controller that reads pods without
// declaring what it reads (an operator's own, beside declared built-ins)
// takes the warm pods informer over without a second LIST: the warm set
// keeps whole pods for it, and both share one cache.
func TestWarmTakeoverWithAnUndeclaredReaderListsOnce(t *testing.T) {
	p := &podReader{informers: map[string][]cache.SharedIndexInformer{}}
	ds := func() []descriptor.Descriptor {
		return []descriptor.Descriptor{p.descriptor("declared-controller", "spec.nodeName"),
			p.descriptor("undeclared-controller")}
	}
	b := warmTakeover(t, ds, "declared-controller", "undeclared-controller")
	if !sameCache(p.got("declared-controller", 1), p.got("undeclared-controller", 1)) {
		t.Error("after the takeover the two controllers read two pod caches")
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
}

// warmTakeover runs replica a of ds under warm standby over five pods
// until running (the controllers named), starts replica b on its API, stops
// a, and checks that b took over with the one LIST of pods its warm set
// made while it followed; it returns b, running.
func warmTakeover(t *testing.T, ds func() []descriptor.Descriptor,
	running ...string) *managertest.Harness {
	t.Helper()
	a := managertest.New(t, "warm-manager", ds(), somePods(5)...)
	a.Options = fastElection("a")
	a.Options.WarmStandby = true
	a.Start()
	a.WaitRunning(running...)
	b := managertest.New(t, "warm-manager", ds()).SameAPI(a)
	lists := countLists(b, "pods")
	b.Options = fastElection("b")
	b.Options.WarmStandby = true
	b.Start()
	managertest.Eventually(t, "b's warm list", func() bool { return lists.Load() == 1 })
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	b.WaitRunning(running...)
	b.WaitHealthy("/readyz")
	if n := lists.Load(); n != 1 {
		t.Errorf("b listed pods %d times; the warm list must serve the takeover", n)
	}
	return b
}

// Under warm standby, a controller that declares the informer the warm
// set keeps and then chooses not to start (its InitFunc returns nil)
// leaves that informer to the term's other readers: an undeclared reader
// built after it takes the warm informer over without a second LIST
// (found by the simulation, seed 2279 of a 2,500-seed run).
func TestWarmTakeoverAfterADecliningDeclarerListsOnce(t *testing.T) {
	p := &podReader{informers: map[string][]cache.SharedIndexInformer{}}
	ds := func() []descriptor.Descriptor {
		declines := descriptor.New("declining-controller",
			func(context.Context, descriptor.Context) (descriptor.Controller, error) {
				return nil, nil
			}).WithInformers(podsGVR)
		return []descriptor.Descriptor{declines, p.descriptor("undeclared-controller")}
	}
	b := warmTakeover(t, ds, "undeclared-controller")
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
}

// A controller restarted at runtime shares a running informer that keeps
// every field it reads, even when the informer it first shared (an
// earlier variant) is gone: no second LIST, no second cache.
func TestARestartedHolderSharesTheRunningVariant(t *testing.T) {
	p := &podReader{informers: map[string][]cache.SharedIndexInformer{}}
	h := managertest.New(t, "test", []descriptor.Descriptor{
		p.descriptor("node-controller", "spec.nodeName"), // the first variant: node names only
		p.descriptor("whole-controller"),                 // the second: whole pods
		p.descriptor("phase-controller", "status.phase"), // shares the second
	}, somePods(3)...)
	lists := countLists(h, "pods")
	h.Options.Controllers = []string{"node-controller"}
	h.Start()
	h.WaitRunning("node-controller")
	h.WaitHealthy("/readyz")
	for _, on := range [][]string{{"*", "-phase-controller"}, {"*"}} {
		if err := h.Manager.SetControllers(on); err != nil {
			t.Fatal(err)
		}
		h.WaitRunning("whole-controller")
		h.WaitHealthy("/readyz")
	}
	h.WaitRunning("phase-controller")
	if !sameCache(p.got("whole-controller", 0), p.got("phase-controller", 0)) {
		t.Fatal("phase-controller does not share the informer of whole pods")
	}
	if err := h.Manager.SetControllers([]string{"*", "-node-controller"}); err != nil {
		t.Fatal(err)
	}
	h.WaitFor("node-controller", manager.PhaseDisabled)
	managertest.Eventually(t, "the first variant stops", p.got("node-controller", 0).IsStopped)
	before := lists.Load()
	for _, sel := range [][]string{{"whole-controller"}, {"whole-controller", "phase-controller"}} {
		if err := h.Manager.SetControllers(sel); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(sel, "phase-controller") {
			h.WaitRunning("phase-controller")
		} else {
			h.WaitFor("phase-controller", manager.PhaseDisabled)
		}
	}
	h.WaitHealthy("/readyz")
	if n := lists.Load(); n != before {
		t.Errorf("phase-controller, restarted, listed pods again (%d lists, %d before)", n, before)
	}
	if !sameCache(p.got("whole-controller", 0), p.got("phase-controller", 1)) {
		t.Error("phase-controller, restarted, got a pod informer of its own")
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// A controller whose InitFunc chooses not to start holds nothing in its
// term: the informers it requested never start (or stop), and, under warm
// standby, the warm set lets go of those it declared; disabling it later
// leaves nothing behind either.
func TestAControllerThatChoseNotToStartHoldsNothing(t *testing.T) {
	notStarting := descriptor.New("idle-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		cc.NamespacedInformerFactory("idle").Core().V1().ConfigMaps().Informer()
		cc.InformerFactory.Core().V1().Secrets().Informer()
		return nil, nil // as node-ipam does without --allocate-node-cidrs
	}).WithInformers(corev1.SchemeGroupVersion.WithResource("secrets"))
	for _, warm := range []bool{false, true} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			h := managertest.New(t, "test", []descriptor.Descriptor{holder("a-controller"), notStarting})
			h.Options = fastElection("me")
			h.Options.WarmStandby = warm
			h.Start()
			h.WaitRunning("a-controller")
			h.WaitFor("idle-controller", manager.PhaseNotStarted)
			h.WaitHealthy("/readyz")
			managertest.Eventually(t, "only a-controller's informer watches", func() bool {
				return h.Watches("configmaps") == 1 && h.Watches("secrets") == 0
			})
			if err := h.Manager.SetControllers([]string{"*", "-idle-controller"}); err != nil {
				t.Fatal(err)
			}
			h.WaitFor("idle-controller", manager.PhaseDisabled)
			if c, s := h.Watches("configmaps"), h.Watches("secrets"); c != 1 || s != 0 {
				t.Errorf("after idle-controller was disabled: %d ConfigMap and %d Secret "+
					"watches, want 1 and 0", c, s)
			}
			if err := h.Stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// keyReceiver is a controller that records, per start, the keys the
// term's queues hand it; when told to stop it tells the test (stopping)
// once the event it records is being written (writing), and waits for it
// (resume) before it returns.
type keyReceiver struct {
	mu       sync.Mutex
	keys     [][]string
	writing  chan struct{}
	stopping chan struct{}
	resume   chan struct{}
}

func (k *keyReceiver) got(start int) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if start >= len(k.keys) {
		return nil
	}
	return slices.Clone(k.keys[start])
}

func (k *keyReceiver) descriptor() descriptor.Descriptor {
	return descriptor.New("receiver-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		k.mu.Lock()
		start := len(k.keys)
		k.keys = append(k.keys, nil)
		k.mu.Unlock()
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			cc.Queues.Handle(func(key string) {
				k.mu.Lock()
				defer k.mu.Unlock()
				k.keys[start] = append(k.keys[start], key)
			})
			<-ctx.Done()
			if start == 0 {
				// An event whose write is still out when Run returns: the
				// host flushes it (up to a second) before it forgets this
				// start.
				ref := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}
				cc.EventRecorder.Event(ref, corev1.EventTypeNormal, "Stopping", "stopping")
				<-k.writing
				close(k.stopping)
				<-k.resume
			}
			return nil
		}), nil
	}).DisabledByDefault()
}

// Keys sent to a controller once it is told to stop, while it stops and
// just after its Run returned, are held for its next start (the term's
// queues), not handed to the queue of the start that is going away.
func TestKeysSentToAStoppingControllerWaitForItsNextStart(t *testing.T) {
	k := &keyReceiver{writing: make(chan struct{}), stopping: make(chan struct{}),
		resume: make(chan struct{})}
	var sender descriptor.Queues
	var mu sync.Mutex
	send := descriptor.New("sender-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		mu.Lock()
		sender = cc.Queues
		mu.Unlock()
		return descriptor.ControllerFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
	})
	h := managertest.New(t, "test", []descriptor.Descriptor{send, k.descriptor()})
	// The stopping start's event write waits, so that the host's flush of
	// its events (after its Run returned) takes a while.
	unblock := make(chan struct{})
	var once sync.Once
	h.Client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(k.writing) })
		<-unblock
		return false, nil, nil
	})
	h.Start()
	h.WaitRunning("sender-controller")
	sendKey := func(key string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if err := sender.Send("receiver-controller", key); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Manager.SetControllers([]string{"*", "receiver-controller"}); err != nil {
		t.Fatal(err)
	}
	h.WaitRunning("receiver-controller")
	managertest.Eventually(t, "the first start takes keys", func() bool {
		sendKey("while-running")
		return slices.Contains(k.got(0), "while-running")
	})
	if err := h.Manager.SetControllers([]string{"*"}); err != nil {
		t.Fatal(err)
	}
	<-k.stopping
	sendKey("while-stopping")
	close(k.resume)
	// Its Run returned; the host flushes its events.
	h.WaitFor("receiver-controller", manager.PhaseStopped, manager.PhaseDisabled)
	sendKey("after-run-returned")
	close(unblock)
	h.WaitFor("receiver-controller", manager.PhaseDisabled)
	if err := h.Manager.SetControllers([]string{"*", "receiver-controller"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"while-stopping", "after-run-returned"}
	managertest.Eventually(t, "the next start gets the held keys", func() bool {
		return slices.Equal(k.got(1), want)
	})
	if got := k.got(0); slices.Contains(got, "while-stopping") || slices.Contains(got, "after-run-returned") {
		t.Errorf("the stopping start took %v", got)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// SetControllers refuses to turn off (or on) a controller that leader
// migration leaves to another component, as it refuses any controller it
// cannot start or stop, and changes nothing.
func TestSetControllersRefusesAControllerOfAnotherComponent(t *testing.T) {
	act := &activity{active: map[string]int{}}
	h := migrationHarness(t, act)
	h.Start()
	h.WaitRunning("main-controller", "node-route-controller")
	for _, entries := range [][]string{{"*", "-cloud-node-controller"}, {"-cloud-node-controller", "*"}} {
		err := h.Manager.SetControllers(entries)
		if err == nil || !strings.Contains(err.Error(), `controller "cloud-node-controller" cannot be disabled`) ||
			!strings.Contains(err.Error(), "run by another component") {
			t.Errorf("SetControllers(%q) = %v, want a refusal naming cloud-node-controller and why",
				entries, err)
		}
	}
	if st, _ := h.Manager.Status("cloud-node-controller"); st.Phase != manager.PhaseSkipped {
		t.Errorf("cloud-node-controller: %s, want skipped", st.Phase)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// Under warm standby a term that fails ends Run (the campaign does not go
// on), so no warm set is prepared for a next term: no LIST of the declared
// resources while Run returns (the simulation saw one, seed 16).
func TestAFailedWarmTermPreparesNoNextSet(t *testing.T) {
	p := &podReader{informers: map[string][]cache.SharedIndexInformer{}}
	failing := descriptor.New("failing-controller",
		func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return nil, errors.New("cannot be built")
		})
	h := managertest.New(t, "warm-manager",
		[]descriptor.Descriptor{p.descriptor("declared-controller", "spec.nodeName"), failing},
		somePods(2)...)
	lists := countLists(h, "pods")
	h.Options = fastElection("a")
	h.Options.WarmStandby = true
	h.Options.LostLeasePolicy = leader.Recampaign
	h.Start()
	if err := h.Err(); err == nil || !strings.Contains(err.Error(), "cannot be built") {
		t.Fatalf("Run returned %v, want the InitFunc's error", err)
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("pods were listed %d times; only the warm set the term adopted lists them", n)
	}
}
