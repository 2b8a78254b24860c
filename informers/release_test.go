package informers_test

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kinformers "k8s.io/client-go/informers"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/internal/poll"
)

// TestForReleasesWhatNoOneElseHolds: two users share the pods informer; one
// of them alone holds the ConfigMaps, Secrets (through an added factory)
// and widgets (metadata) informers. Releasing it stops and drops those,
// removes its handler from the shared one, which goes on delivering to the
// other user; releasing the other drops the last. What the Set itself requested stays until its own
// Shutdown.
func TestForReleasesWhatNoOneElseHolds(t *testing.T) {
	f := newFixture(t, informers.Options{}, []runtime.Object{seededPod()},
		[]runtime.Object{seededWidget()})
	root := f.set
	a, b := root.For("a"), root.For("b")
	if a.User() != "a" || root.User() != "" {
		t.Fatalf("User() = %q and %q, want a and empty", a.User(), root.User())
	}

	podsA := a.Typed().Core().V1().Pods().Informer()
	cms := a.Typed().Core().V1().ConfigMaps().Informer()
	widgets := a.Metadata().ForResource(widgetsGVR).Informer()
	secrets := kinformers.NewSharedInformerFactory(f.typed, 0)
	secretsInf := secrets.Core().V1().Secrets().Informer()
	a.AddFactory(secrets)
	podsB := b.Typed().Core().V1().Pods().Informer()
	if podsA.GetIndexer() != podsB.GetIndexer() {
		t.Fatal("two users of one Set got two pods informers")
	}
	nodes := root.Typed().Core().V1().Nodes().Informer()
	if got := root.Informers(); got != 4 {
		t.Fatalf("Informers() = %d, want 4 (pods, configmaps, widgets, nodes)", got)
	}
	if isClosed(b.Started()) {
		t.Fatal("a view's Started is closed before Start")
	}
	start(t, root)
	b.Start(make(chan struct{})) // its channel is not the Set's lifetime: never closed here
	if !isClosed(b.Started()) {
		t.Fatal("a view's Started is not closed by its Start")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := root.WaitForCacheSync(ctx); err != nil {
		t.Fatal(err)
	}
	var seenByA, seenByB atomic.Int32
	seen := map[cache.SharedIndexInformer]*atomic.Int32{podsA: &seenByA, podsB: &seenByB}
	for inf, n := range seen {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { n.Add(1) },
		}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Within(testTimeout).Until(t, "a and b see the seeded pod", func() bool {
		return seenByA.Load() == 1 && seenByB.Load() == 1
	})

	a.Shutdown()
	for name, inf := range map[string]cache.SharedIndexInformer{
		"configmaps": cms, "widgets": widgets, "secrets (added factory)": secretsInf,
	} {
		if !inf.IsStopped() {
			t.Errorf("%s: still running after its only user was released", name)
		}
	}
	if podsA.IsStopped() || nodes.IsStopped() {
		t.Fatal("a shared or root informer stopped with one user's release")
	}
	if got := root.Informers(); got != 2 {
		t.Errorf("Informers() after releasing a = %d, want 2 (pods, nodes)", got)
	}
	p := seededPod()
	p.Name = "p2"
	if _, err := f.typed.CoreV1().Pods("ns").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Within(testTimeout).Until(t, "b sees a new pod after a's release",
		func() bool { return seenByB.Load() == 2 })
	if n := seenByA.Load(); n != 1 {
		t.Errorf("a's handler, released, was called %d times, want once (before its release)", n)
	}
	a.Shutdown() // twice is harmless

	b.Shutdown()
	if !podsB.IsStopped() {
		t.Error("pods: still running after its last user was released")
	}
	if nodes.IsStopped() {
		t.Error("nodes, the Set's own, stopped before the Set's Shutdown")
	}
	if got := root.Informers(); got != 1 {
		t.Errorf("Informers() after releasing b = %d, want 1 (nodes)", got)
	}

	// A user that comes back gets a new informer, started at the next
	// Start, that syncs.
	c := root.For("a")
	again := c.Typed().Core().V1().ConfigMaps().Informer()
	if again.GetIndexer() == cms.GetIndexer() {
		t.Fatal("a released informer was handed out again")
	}
	c.Start(nil)
	if err := c.WaitForCacheSync(ctx); err != nil {
		t.Fatal(err)
	}
	c.Shutdown()
}

// TestViewWaitsForItsOwn: a view's Synced and WaitForCacheSync cover the
// informers its user holds; the Set's cover every one.
func TestViewWaitsForItsOwn(t *testing.T) {
	f := newFixture(t, informers.Options{}, nil, nil)
	stuck := f.set.For("stuck")
	blockPods(f)
	stuck.Typed().Core().V1().Pods().Informer()
	fine := f.set.For("fine")
	fine.Typed().Core().V1().ConfigMaps().Informer()
	start(t, f.set)
	fine.Start(nil)
	stuck.Start(nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := fine.WaitForCacheSync(ctx); err != nil {
		t.Fatalf("the view without the stuck informer: %v", err)
	}
	if err := fine.Synced(); err != nil {
		t.Errorf("Synced() of the view without the stuck informer = %v", err)
	}
	pods := reflect.TypeFor[*corev1.Pod]().String()
	for name, s := range map[string]*informers.Set{"the stuck view": stuck, "the Set": f.set} {
		if err := s.Synced(); err == nil {
			t.Errorf("Synced() of %s = nil, want an error naming %s", name, pods)
		}
	}
	stuck.Shutdown()
	fine.Shutdown()
	if err := f.set.Synced(); err != nil {
		t.Errorf("Synced() of the Set once the stuck informer was released = %v", err)
	}
}

// TestShutdownOfTheSetStopsViews: the Set's Shutdown stops what its views
// hold, and nothing requested afterwards starts.
func TestShutdownOfTheSetStopsViews(t *testing.T) {
	f := newFixture(t, informers.Options{}, []runtime.Object{seededPod()}, nil)
	v := f.set.For("v")
	pods := v.Typed().Core().V1().Pods().Informer()
	stop := make(chan struct{})
	f.set.Start(stop)
	close(stop)
	shutdownWithin(t, f.set)
	if !pods.IsStopped() {
		t.Error("a view's informer runs after the Set's Shutdown")
	}
	v.Typed().Core().V1().Secrets().Informer()
	v.Start(make(chan struct{}))
	v.Shutdown()
	for _, a := range f.typed.Actions() {
		if a.GetResource().Resource == "secrets" {
			t.Errorf("an informer requested after Shutdown ran: %v", a)
		}
	}
	goleak.VerifyNone(t)
}

// blockPods makes every list and watch of pods fail, so that a pods
// informer never syncs.
func blockPods(f fixture) {
	refuse := errors.New("refused by the test")
	f.typed.PrependReactor("list", "pods",
		func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, refuse })
	f.typed.PrependWatchReactor("pods", func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, nil, refuse
	})
}

// TestForHoldersOfOneUser: two holders made for one user are two holders:
// releasing the first (a controller's earlier start, whose InitFunc
// returned late) leaves what the second holds running.
func TestForHoldersOfOneUser(t *testing.T) {
	f := newFixture(t, informers.Options{}, []runtime.Object{seededPod()}, nil)
	first, second := f.set.For("a"), f.set.For("a")
	first.Typed().Core().V1().Pods().Informer()
	pods := second.Typed().Core().V1().Pods().Informer()
	start(t, f.set)
	first.Shutdown()
	if pods.IsStopped() {
		t.Fatal("releasing one holder of user a stopped what another holder of a holds")
	}
	second.Shutdown()
	if !pods.IsStopped() {
		t.Fatal("pods runs after both holders were released")
	}
}
