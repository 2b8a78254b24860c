package workloop

import (
	"context"
	"testing"
	"time"

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
