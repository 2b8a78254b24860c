package manager_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// toggled records, per controller, the informers each build made (the
// ConfigMaps of every namespace, shared by all, and the ConfigMaps of the
// namespace named after it, its own) and how many of its Runs are running.
type toggled struct {
	mu        sync.Mutex
	informers map[string][]cache.SharedIndexInformer
	own       map[string][]cache.SharedIndexInformer
	running   map[string]int
	seen      map[string]map[string]bool // controller → ConfigMaps its handler saw
}

func newToggled() *toggled {
	return &toggled{informers: map[string][]cache.SharedIndexInformer{},
		own: map[string][]cache.SharedIndexInformer{}, running: map[string]int{},
		seen: map[string]map[string]bool{}}
}

func (tg *toggled) saw(controller, configMap string) bool {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.seen[controller][configMap]
}

func (tg *toggled) descriptor(name string) descriptor.Descriptor {
	init := func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		inf := cc.InformerFactory.Core().V1().ConfigMaps().Informer()
		own := cc.NamespacedInformerFactory(name).Core().V1().ConfigMaps().Informer()
		tg.mu.Lock()
		tg.informers[name] = append(tg.informers[name], inf)
		tg.own[name] = append(tg.own[name], own)
		tg.mu.Unlock()
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			tg.mu.Lock()
			defer tg.mu.Unlock()
			if tg.seen[name] == nil {
				tg.seen[name] = map[string]bool{}
			}
			tg.seen[name][obj.(*corev1.ConfigMap).Name] = true
		}})
		if err != nil {
			return nil, err
		}
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			tg.mu.Lock()
			tg.running[name]++
			tg.mu.Unlock()
			<-ctx.Done()
			tg.mu.Lock()
			tg.running[name]--
			tg.mu.Unlock()
			return nil
		}), nil
	}
	return descriptor.New(name, init)
}

// sameCache reports whether two informers are one shared informer: client-go
// wraps it anew at every Informer() call, around one cache.
func sameCache(a, b cache.SharedIndexInformer) bool {
	return a != nil && b != nil && a.GetIndexer() == b.GetIndexer()
}

func (tg *toggled) runs(name string) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.running[name]
}

func (tg *toggled) informer(name string, i int) cache.SharedIndexInformer {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if i >= len(tg.informers[name]) {
		return nil
	}
	return tg.informers[name][i]
}

// ownInformer is the informer only build i of the controller requested.
func (tg *toggled) ownInformer(name string, i int) cache.SharedIndexInformer {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if i >= len(tg.own[name]) {
		return nil
	}
	return tg.own[name][i]
}

// SetControllers turns controllers on and off in the running term, with
// --controllers' rules: one enabled at runtime shares the term's informers;
// one stopped, whether the term built it at its start or not, stops alone,
// its handlers removed and the informers only it held stopped, while the
// informers others share and the others go on untouched.
func TestSetControllersAtRuntime(t *testing.T) {
	tg := newToggled()
	h := managertest.New(t, "test", []descriptor.Descriptor{
		tg.descriptor("a-controller"), tg.descriptor("b-controller"),
		tg.descriptor("c-controller").DisabledByDefault(),
	})
	h.Options.Controllers = []string{"a-controller", "c-controller"}
	h.Start()
	h.WaitRunning("a-controller", "c-controller")
	st := h.WaitFor("b-controller", manager.PhaseDisabled)
	if st.Reason != "not selected by --controllers" {
		t.Errorf("b-controller's reason = %q", st.Reason)
	}
	h.WaitHealthy("/readyz")
	_, body := h.Get("/readyz?verbose")
	if !strings.Contains(body, "[+]b-controller ok: not selected") {
		t.Errorf("/readyz?verbose does not show b-controller, which may be enabled:\n%s", body)
	}
	if _, body = h.Get("/healthz?verbose"); strings.Contains(body, "b-controller") {
		t.Errorf("/healthz?verbose lists b-controller, not selected at start (KCM's lists "+
			"the controllers it started):\n%s", body)
	}

	// b on: it runs, sharing the term's informer of all ConfigMaps.
	if err := h.Manager.SetControllers([]string{"*"}); err != nil {
		t.Fatal(err)
	}
	h.WaitRunning("b-controller")
	if st, _ := h.Manager.Status("c-controller"); st.Phase != manager.PhaseDisabled {
		// "*" does not select a DisabledByDefault controller.
		t.Errorf("c-controller after \"*\": phase %q, want disabled", st.Phase)
	}
	bInf, bOwn := tg.informer("b-controller", 0), tg.ownInformer("b-controller", 0)
	if bInf == nil || !sameCache(bInf, tg.informer("a-controller", 0)) {
		t.Fatal("b-controller, started at runtime, does not share the term's informer " +
			"with a-controller")
	}
	h.WaitHealthy("/readyz")
	// c on again, by name: a unit now, on the same shared informer.
	if err := h.Manager.SetControllers([]string{"*", "c-controller"}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "c-controller runs again", func() bool {
		return tg.runs("c-controller") == 1 && tg.informer("c-controller", 1) != nil
	})
	if !sameCache(tg.informer("c-controller", 1), bInf) {
		t.Fatal("c-controller, started again, does not share the term's informer")
	}

	// a off (the term's own), b off (a unit): each stops alone.
	off := []string{"c-controller", "-a-controller", "-b-controller"}
	if err := h.Manager.SetControllers(off); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a-controller", "b-controller"} {
		st := h.WaitFor(name, manager.PhaseDisabled)
		if !strings.Contains(st.Reason, "SetControllers") {
			t.Errorf("%s's reason = %q, want one naming SetControllers", name, st.Reason)
		}
		if n := tg.runs(name); n != 0 {
			t.Errorf("%s is disabled with %d Runs running", name, n)
		}
	}
	for name, own := range map[string]cache.SharedIndexInformer{
		"a-controller": tg.ownInformer("a-controller", 0), "b-controller": bOwn,
	} {
		if !own.IsStopped() {
			t.Errorf("%s is disabled, but the informer only it held runs", name)
		}
	}
	if bInf.IsStopped() || tg.informer("a-controller", 0).IsStopped() {
		t.Error("the shared informer was stopped: c-controller still holds it")
	}
	if tg.runs("c-controller") != 1 {
		t.Error("c-controller was disturbed")
	}
	// a-controller's handler went from the informer it shares with c.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: "default"}}
	if _, err := h.Client.CoreV1().ConfigMaps("default").Create(t.Context(), cm,
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "c-controller sees the new ConfigMap", func() bool {
		return tg.saw("c-controller", "after")
	})
	if tg.saw("a-controller", "after") {
		t.Error("a-controller, disabled, still has its event handler on the shared informer")
	}
	h.WaitHealthy("/readyz")

	// a on again: a unit now, the term's own having stopped.
	if err := h.Manager.SetControllers([]string{"a-controller", "c-controller"}); err != nil {
		t.Fatal(err)
	}
	h.WaitRunning("a-controller")
	if st, _ := h.Manager.Status("a-controller"); st.Starts != 2 {
		t.Errorf("a-controller Starts = %d, want 2", st.Starts)
	}
	if !sameCache(tg.informer("a-controller", 1), tg.informer("c-controller", 1)) {
		t.Error("a-controller, started again, does not share c-controller's informer")
	}
	if own := tg.ownInformer("a-controller", 1); own == nil ||
		sameCache(own, tg.ownInformer("a-controller", 0)) || own.IsStopped() {
		t.Error("a-controller, started again, did not get a new informer of its own")
	}
	managertest.Eventually(t, "a-controller's new informer syncs", func() bool {
		return tg.ownInformer("a-controller", 1).HasSynced()
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// A change SetControllers cannot make changes nothing and says why.
func TestSetControllersRejects(t *testing.T) {
	noop := func(context.Context, descriptor.Context) (descriptor.Controller, error) {
		return nil, nil
	}
	first := descriptor.New("first-controller", noop).StartFirst()
	tg := newToggled()
	ds := []descriptor.Descriptor{first, tg.descriptor("a-controller")}
	h := managertest.New(t, "test", ds).Start()
	h.WaitRunning("a-controller")
	for _, tc := range []struct {
		entries []string
		want    string
		is      error
	}{
		{[]string{"nope"}, `"nope" is not a known controller`, manager.ErrUnknownController},
		{[]string{"-first-controller", "-a-controller"},
			`controller "first-controller" cannot be disabled at runtime: it is StartFirst`, nil},
		{[]string{""}, "entry #1 is empty", nil},
	} {
		err := h.Manager.SetControllers(tc.entries)
		if err == nil || !strings.Contains(err.Error(), tc.want) ||
			(tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("SetControllers(%q) = %v, want an error containing %q",
				tc.entries, err, tc.want)
		}
	}
	if st, _ := h.Manager.Status("a-controller"); st.Phase != manager.PhaseRunning {
		t.Errorf("a refused change changed a-controller: phase %q", st.Phase)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// A term that starts after a change starts from the current selection:
// the follower, told before it leads, builds b-controller with the term.
func TestSetControllersNextTerm(t *testing.T) {
	tg := newToggled()
	ds := func() []descriptor.Descriptor {
		return []descriptor.Descriptor{tg.descriptor("a-controller"), tg.descriptor("b-controller")}
	}
	leader := managertest.New(t, "test", ds())
	leader.Options = fastElection("leader")
	leader.Options.Controllers = []string{"a-controller"}
	leader.Start()
	leader.WaitRunning("a-controller")
	follower := managertest.New(t, "test", ds()).Share(leader)
	follower.Options = fastElection("follower")
	follower.Options.Controllers = []string{"a-controller"}
	follower.Start()
	managertest.Eventually(t, "the follower knows the leader", func() bool {
		l, _ := follower.Manager.Leader()
		return l == "leader"
	})
	if err := follower.Manager.SetControllers([]string{"*"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := follower.Manager.Status("b-controller"); st.Phase != manager.PhaseWaiting {
		t.Errorf("b-controller on the follower: phase %q, want waiting", st.Phase)
	}
	if err := leader.Stop(); err != nil {
		t.Fatal(err)
	}
	follower.WaitRunning("a-controller", "b-controller")
	if !sameCache(tg.informer("a-controller", 1), tg.informer("b-controller", 0)) {
		t.Error("the new term built b-controller apart from a-controller; " +
			"it should share the term's informers")
	}
	if err := follower.Stop(); err != nil {
		t.Fatal(err)
	}
}
