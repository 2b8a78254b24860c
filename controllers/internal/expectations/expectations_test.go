package expectations

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSatisfied(t *testing.T) {
	const key = "ns/rs"
	tests := []struct {
		name string
		do   func(e *Expectations, clk *clocktesting.FakePassiveClock)
		want bool
	}{
		{"nothing recorded", func(*Expectations, *clocktesting.FakePassiveClock) {}, true},
		{"creations pending", func(e *Expectations, _ *clocktesting.FakePassiveClock) {
			e.ExpectCreations(key, 2)
			e.CreationObserved(key)
		}, false},
		{"creations observed", func(e *Expectations, _ *clocktesting.FakePassiveClock) {
			e.ExpectCreations(key, 2)
			e.CreationObserved(key)
			e.CreationObserved(key)
		}, true},
		{
			"creations lowered for skipped ones",
			func(e *Expectations, _ *clocktesting.FakePassiveClock) {
				e.ExpectCreations(key, 5)
				e.LowerCreations(key, 3)
				e.CreationObserved(key)
				e.CreationObserved(key)
			},
			true,
		},
		{"deletions pending", func(e *Expectations, _ *clocktesting.FakePassiveClock) {
			e.ExpectDeletions(key, []string{"ns/a", "ns/b"})
			e.DeletionObserved(key, "ns/a")
		}, false},
		{
			"same deletion observed twice counts once",
			func(e *Expectations, _ *clocktesting.FakePassiveClock) {
				e.ExpectDeletions(key, []string{"ns/a", "ns/b"})
				e.DeletionObserved(key, "ns/a")
				e.DeletionObserved(key, "ns/a")
			},
			false,
		},
		{"unexpected deletion ignored", func(e *Expectations, _ *clocktesting.FakePassiveClock) {
			e.ExpectDeletions(key, []string{"ns/a"})
			e.DeletionObserved(key, "ns/other")
		}, false},
		{"deletions observed", func(e *Expectations, _ *clocktesting.FakePassiveClock) {
			e.ExpectDeletions(key, []string{"ns/a", "ns/b"})
			e.DeletionObserved(key, "ns/b")
			e.DeletionObserved(key, "ns/a")
		}, true},
		{"expired after TTL", func(e *Expectations, clk *clocktesting.FakePassiveClock) {
			e.ExpectCreations(key, 1)
			clk.SetTime(clk.Now().Add(TTL + time.Second))
		}, true},
		{"not expired at TTL", func(e *Expectations, clk *clocktesting.FakePassiveClock) {
			e.ExpectCreations(key, 1)
			clk.SetTime(clk.Now().Add(TTL))
		}, false},
		{
			"new expectations restart the TTL",
			func(e *Expectations, clk *clocktesting.FakePassiveClock) {
				e.ExpectCreations(key, 1)
				clk.SetTime(clk.Now().Add(TTL + time.Second))
				e.ExpectDeletions(key, []string{"ns/a"})
			},
			false,
		},
		{"deleted", func(e *Expectations, _ *clocktesting.FakePassiveClock) {
			e.ExpectCreations(key, 3)
			e.Delete(key)
		}, true},
		{"other key unaffected", func(e *Expectations, _ *clocktesting.FakePassiveClock) {
			e.ExpectCreations("ns/other", 3)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			e := New(clk)
			tt.do(e, clk)
			if got := e.Satisfied(key); got != tt.want {
				adds, dels, _ := e.Pending(key)
				t.Errorf(
					"Satisfied = %v, want %v (pending adds %d, dels %d)",
					got,
					tt.want,
					adds,
					dels,
				)
			}
		})
	}
}

func TestPending(t *testing.T) {
	e := New(nil)
	if _, _, ok := e.Pending("k"); ok {
		t.Fatal("Pending reports an entry for an unknown key")
	}
	e.ExpectCreations("k", 4)
	e.LowerCreations("k", 1)
	if adds, dels, ok := e.Pending("k"); !ok || adds != 3 || dels != 0 {
		t.Errorf("Pending = %d, %d, %v; want 3, 0, true", adds, dels, ok)
	}
	e.ExpectDeletions("k", []string{"ns/a", "ns/a", "ns/b"})
	if adds, dels, ok := e.Pending("k"); !ok || adds != 0 || dels != 2 {
		t.Errorf("after ExpectDeletions: Pending = %d, %d, %v; want 0, 2, true", adds, dels, ok)
	}
}

// TestConcurrent is for -race: observers and writers on the same keys.
func TestConcurrent(t *testing.T) {
	e := New(nil)
	const n = 100
	var pods []string
	for i := range n {
		pods = append(pods, fmt.Sprintf("ns/p%d", i))
	}
	e.ExpectDeletions("del", pods)
	e.ExpectCreations("add", n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { e.CreationObserved("add") })
		wg.Go(func() { e.DeletionObserved("del", pods[i]) })
		wg.Go(func() { _ = e.Satisfied("add") })
	}
	wg.Wait()
	if !e.Satisfied("add") || !e.Satisfied("del") {
		t.Errorf(
			"not satisfied after every observation: %v %v",
			e.Satisfied("add"),
			e.Satisfied("del"),
		)
	}
}
