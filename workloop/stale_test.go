package workloop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/internal/poll"
)

func TestStalenessGuard(t *testing.T) {
	written := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", ResourceVersion: "10"},
	}
	at := func(rv string) *corev1.Pod {
		p := written.DeepCopy()
		p.ResourceVersion = rv
		return p
	}
	other := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q", UID: "u2", ResourceVersion: "99"},
	}
	tests := []struct {
		name      string
		observe   func(l *Loop)
		wantStale bool
	}{
		{name: "nothing delivered", observe: func(*Loop) {}, wantStale: true},
		{
			name:      "older version delivered",
			observe:   func(l *Loop) { l.Observe(at("9")) },
			wantStale: true,
		},
		{
			name:      "another object delivered",
			observe:   func(l *Loop) { l.Observe(other) },
			wantStale: true,
		},
		{name: "written version delivered", observe: func(l *Loop) { l.Observe(at("10")) }},
		{name: "newer version delivered", observe: func(l *Loop) { l.Observe(at("11")) }},
		{name: "deletion delivered", observe: func(l *Loop) { l.ObserveDelete(at("9")) }},
		{name: "tombstone delivered", observe: func(l *Loop) {
			l.ObserveDelete(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: at("9")})
		}},
		{
			name:    "unordered versions count as delivered",
			observe: func(l *Loop) { l.Observe(at("not-a-number")) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New("stale-test", func(context.Context, string) error { return nil }, Options{})
			defer l.ShutDown()
			l.Wrote("ns/owner", written)
			tt.observe(l)
			if got := l.Stale("ns/owner"); got != tt.wantStale {
				t.Errorf("Stale = %v, want %v", got, tt.wantStale)
			}
		})
	}
}

func TestStalenessGuardTimesOut(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	l := New(
		"stale-timeout",
		func(context.Context, string) error { return nil },
		Options{Clock: clk, StaleTimeout: time.Minute},
	)
	defer l.ShutDown()
	l.Wrote("k", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u", ResourceVersion: "5"}})
	if !l.Stale("k") {
		t.Fatal("key not held after a write")
	}
	clk.Step(time.Minute)
	if l.Stale("k") {
		t.Error("key still held after StaleTimeout")
	}
}

func TestStaleSyncIsSkippedCountedAndRetried(t *testing.T) {
	var r recorder
	name := "stale-skip"
	before := counterValue(t, processCounters.staleSkips, name)
	l := New(name, func(_ context.Context, key string) error { r.inc(key); return nil },
		Options{StaleRetry: time.Millisecond})
	written := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u", ResourceVersion: "5"}}
	l.Wrote("k", written)
	l.Add("k")
	stop := runLoop(t, l)
	poll.Until(t, "a skipped sync",
		func() bool { return counterValue(t, processCounters.staleSkips, name) > before })
	if r.get("k") != 0 {
		t.Fatal("a stale key was synced")
	}
	l.Observe(written)
	poll.Until(t, "the sync once the write was delivered", func() bool { return r.get("k") == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestStalenessGuardEventBeforeWrote covers the API server sending the
// watch event before the write's response reaches the controller.
func TestStalenessGuardEventBeforeWrote(t *testing.T) {
	l := New("stale-race", func(context.Context, string) error { return nil }, Options{})
	defer l.ShutDown()
	written := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", ResourceVersion: "10"},
	}
	l.Observe(written)
	l.Wrote("ns/p", written)
	if l.Stale("ns/p") {
		t.Error("key held although the informer had already delivered the write")
	}
	newer := written.DeepCopy()
	newer.ResourceVersion = "11"
	l.Wrote("ns/p", newer)
	if !l.Stale("ns/p") {
		t.Error("key not held for a write newer than the last delivery")
	}
}

// TestStalenessGuardDeletionBeforeWrote: a write that let an object go (a
// patch removing the last finalizer of an object being deleted) may have
// its deletion delivered before Wrote records it; nothing more will come,
// so the key must not be held until StaleTimeout.
func TestStalenessGuardDeletionBeforeWrote(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	l := New(
		"stale-deleted",
		func(context.Context, string) error { return nil },
		Options{Clock: clk, StaleTimeout: time.Minute},
	)
	defer l.ShutDown()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", ResourceVersion: "10"},
	}
	l.Observe(p)
	gone := p.DeepCopy()
	gone.ResourceVersion = "11"
	l.ObserveDelete(gone)
	l.Wrote("ns/job", gone)
	if l.Stale("ns/job") {
		t.Error("key held for a write whose object's deletion was already delivered")
	}
	// The memory of deletions is bounded by StaleTimeout: a UID deleted
	// longer ago than that is forgotten (UIDs are never reused, so only a
	// stray write could name it, and the timeout bounds that too).
	clk.Step(time.Minute)
	l.ObserveDelete(
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:       "ns",
				Name:            "q",
				UID:             "u2",
				ResourceVersion: "12",
			},
		},
	)
	if n := l.guard.goneCount(); n != 1 {
		t.Errorf("the guard remembers %d deletions, want 1 (the older one expired)", n)
	}
}

// TestStalenessGuardOneObjectTwoKeys: an object written while syncing two
// keys (say, a shared ConfigMap two owners patch) holds each key only until
// the informer delivers the version that key wrote, not until StaleTimeout.
func TestStalenessGuardOneObjectTwoKeys(t *testing.T) {
	obj := func(rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "shared", UID: "u1", ResourceVersion: rv}}
	}
	tests := []struct {
		name         string
		rvA, rvB     string // written under key a, then under key b
		observe      func(l *Loop)
		wantA, wantB bool
	}{
		{name: "same version, delivered", rvA: "10", rvB: "10",
			observe: func(l *Loop) { l.Observe(obj("10")) }},
		{name: "second newer, both delivered", rvA: "10", rvB: "11",
			observe: func(l *Loop) { l.Observe(obj("11")) }},
		{name: "second newer, only the first delivered", rvA: "10", rvB: "11",
			observe: func(l *Loop) { l.Observe(obj("10")) }, wantB: true},
		{name: "second older, the first delivered", rvA: "11", rvB: "10",
			observe: func(l *Loop) { l.Observe(obj("11")) }},
		{name: "second older, only the second delivered", rvA: "11", rvB: "10",
			observe: func(l *Loop) { l.Observe(obj("10")) }, wantA: true},
		{name: "deletion delivered", rvA: "10", rvB: "11",
			observe: func(l *Loop) { l.ObserveDelete(obj("11")) }},
		{name: "nothing delivered", rvA: "10", rvB: "11",
			observe: func(*Loop) {}, wantA: true, wantB: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Now())
			l := New("stale-two-keys", func(context.Context, string) error { return nil },
				Options{Clock: clk, StaleTimeout: time.Hour})
			defer l.ShutDown()
			l.Wrote("ns/a", obj(tt.rvA))
			l.Wrote("ns/b", obj(tt.rvB))
			tt.observe(l)
			// The clock does not move: only a delivery may release a key.
			if got := l.Stale("ns/a"); got != tt.wantA {
				t.Errorf("Stale(ns/a) = %v, want %v", got, tt.wantA)
			}
			if got := l.Stale("ns/b"); got != tt.wantB {
				t.Errorf("Stale(ns/b) = %v, want %v", got, tt.wantB)
			}
		})
	}
}

// TestAnExpiredWriteIsCountedAndLogged: a write no informer delivers
// within StaleTimeout (its handler does not call Observe) is counted, and
// the first of its kind is logged at level 0 naming the object and the
// fix; later ones of that kind only at level 2.
func TestAnExpiredWriteIsCountedAndLogged(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	name := "stale-expired"
	var synced int
	l := New(name, func(context.Context, string) error { synced++; return nil },
		Options{Clock: clk, StaleTimeout: time.Minute})
	defer l.ShutDown()
	type line struct {
		level int
		args  string
	}
	var lines []line
	log := funcr.New(func(prefix, args string) { lines = append(lines, line{0, args}) },
		funcr.Options{Verbosity: 2, LogInfoLevel: ptr("level")})
	ctx := logr.NewContext(t.Context(), log)
	before := counterValue(t, processCounters.staleExpired, name)

	expire := func(pod string) {
		t.Helper()
		l.Wrote("ns/owner", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pod,
			UID: types.UID(pod), ResourceVersion: "5"}})
		clk.Step(time.Minute)
		l.Add("ns/owner")
		if !l.next(ctx) {
			t.Fatal("the queue shut down")
		}
	}
	expire("p1")
	expire("p2")
	if synced != 2 {
		t.Errorf("synced %d times, want 2: an expired write no longer holds its key", synced)
	}
	if got := counterValue(t, processCounters.staleExpired, name) - before; got != 2 {
		t.Errorf("workloop_stale_writes_expired_total rose by %v, want 2", got)
	}
	var expiredLines []string
	for _, l := range lines {
		if strings.Contains(l.args, "not delivered") {
			expiredLines = append(expiredLines, l.args)
		}
	}
	switch {
	case len(expiredLines) != 2:
		t.Fatalf("logged %q, want one line per expired write", expiredLines)
	case !strings.Contains(expiredLines[0], `"level"=0`) ||
		!strings.Contains(expiredLines[0], "v1.Pod ns/p1") ||
		!strings.Contains(expiredLines[0], "Loop.Watch"):
		t.Errorf("first expiry logged %q, want level 0, the object and the fix", expiredLines[0])
	case !strings.Contains(expiredLines[1], `"level"=2`):
		t.Errorf("second expiry of the kind logged %q, want level 2", expiredLines[1])
	}
}

func ptr[T any](v T) *T { return &v }
