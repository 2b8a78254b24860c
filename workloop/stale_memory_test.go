package workloop

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
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
