package workloop

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/internal/poll"
)

// TestStalenessGuardHoldsNoEntryPerCachedObject: the deliveries the guard
// remembers for the event-before-Wrote race are forgotten after
// seenWindow, so an informer's initial list leaves nothing behind (before,
// the guard kept a resourceVersion for every live object it had seen).
func TestStalenessGuardHoldsNoEntryPerCachedObject(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	l := New("stale-memory", func(context.Context, string) error { return nil }, Options{Clock: clk})
	defer l.ShutDown()
	pod := func(i int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("p", i),
			UID: types.UID(fmt.Sprint("u", i)), ResourceVersion: fmt.Sprint(10 + i)}}
	}
	for i := range 1000 {
		l.Observe(pod(i))
	}
	if n := l.guard.seenCount(); n != 1000 {
		t.Fatalf("right after the list the guard remembers %d deliveries, want 1000", n)
	}
	// Within the window a Wrote after its own event is still recognised.
	l.Wrote("ns/p7", pod(7))
	if l.Stale("ns/p7") {
		t.Error("key held although its write was delivered within the window")
	}
	clk.Step(seenWindow)
	l.Observe(pod(1000))
	if n := l.guard.seenCount(); n != 1 {
		t.Errorf("one window after the list the guard remembers %d deliveries, want 1", n)
	}
	// A Wrote that comes later than the window after its event holds its
	// key until the next delivery of the object (liveness, not safety).
	l.Wrote("ns/p8", pod(8))
	if !l.Stale("ns/p8") {
		t.Error("a write whose delivery was forgotten is not held")
	}
	l.Observe(pod(8))
	if l.Stale("ns/p8") {
		t.Error("key still held after the object's next delivery")
	}
}

// TestWatchedInitialListLeavesNoEntry: a Loop watching an informer does not
// remember the deliveries of its initial list, nor of the replay a running
// informer gives it: no write of the Loop can be among them (its workers
// start after them), and in a quiet cluster they would stay, one entry per
// cached object and watching Loop, until the next event. A later delivery
// is remembered.
func TestWatchedInitialListLeavesNoEntry(t *testing.T) {
	var objs []runtime.Object
	for i := range 500 {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns",
			Name: fmt.Sprint("p", i), UID: types.UID(fmt.Sprint("u", i))}})
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Pods().Informer()
	first := New("first", func(context.Context, string) error { return nil }, Options{})
	defer first.ShutDown()
	if err := first.Watch(inf, EnqueueKey()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer never synced")
	}
	// A Loop joining the running informer gets its cache replayed.
	second := New("second", func(context.Context, string) error { return nil }, Options{})
	defer second.ShutDown()
	if err := second.Watch(inf, EnqueueKey()); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Loop{first, second} {
		if !waitSynced(ctx, l.checkers, nil) {
			t.Fatalf("%s: the registration never synced", l.name)
		}
		if n := l.guard.seenCount(); n != 0 {
			t.Errorf("%s: the guard remembers %d deliveries of the initial list, want 0",
				l.name, n)
		}
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new", UID: "new"}}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !poll.For(poll.Timeout, func() bool {
		return first.guard.seenCount() == 1 && second.guard.seenCount() == 1
	}) {
		t.Errorf("a later delivery is not remembered: %d and %d entries",
			first.guard.seenCount(), second.guard.seenCount())
	}
}

// TestObserveAddSkipsTheInitialList: a handler registered without Watch
// shows the guard its adds through ObserveAdd, which skips the initial
// list as Watch does and remembers a later add.
func TestObserveAddSkipsTheInitialList(t *testing.T) {
	l := New("observe-add", func(context.Context, string) error { return nil }, Options{})
	defer l.ShutDown()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u",
		ResourceVersion: "10"}}
	l.ObserveAdd(pod, true)
	if n := l.guard.seenCount(); n != 0 {
		t.Errorf("after an add from the initial list the guard remembers %d deliveries, want 0", n)
	}
	l.ObserveAdd(pod, false)
	if n := l.guard.seenCount(); n != 1 {
		t.Errorf("after a later add the guard remembers %d deliveries, want 1", n)
	}
}
