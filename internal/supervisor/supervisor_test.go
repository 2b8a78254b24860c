package supervisor_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/internal/supervisor"
)

const long = 30 * time.Second // only a broken implementation waits this long

func TestWaitReturnsWhenAllReturned(t *testing.T) {
	g := supervisor.NewGroup()
	release := make(chan struct{})
	for _, name := range []string{"a", "b", "a"} {
		g.Go(name, func() { <-release })
	}
	if got := g.Running(); !slices.Equal(got, []string{"a", "a", "b"}) {
		t.Fatalf("Running = %v", got)
	}
	close(release)
	if stuck := g.Wait(supervisor.NewDeadline(long, "timeout"), nil); stuck != nil {
		t.Fatalf("Wait = %v, want nil", stuck)
	}
}

func TestWaitNamesStragglersAtTheDeadline(t *testing.T) {
	g := supervisor.NewGroup()
	release := make(chan struct{})
	defer close(release)
	g.Go("quick", func() {})
	g.Go("stuck", func() { <-release })
	var ticks int
	stuck := g.Wait(
		supervisor.NewDeadline(30*time.Millisecond, "--timeout"),
		func(running []string) { ticks++ },
	)
	if !slices.Equal(stuck, []string{"stuck"}) {
		t.Fatalf("Wait = %v, want [stuck]", stuck)
	}
	if ticks == 0 {
		t.Error("onTick was never called while waiting")
	}
}

func TestWaitWithNothingRunning(t *testing.T) {
	if stuck := supervisor.NewGroup().Wait(supervisor.NewDeadline(long, "x"), nil); stuck != nil {
		t.Fatalf("Wait = %v", stuck)
	}
}

func TestGoAfterWaitBeganIsWaitedFor(t *testing.T) {
	g := supervisor.NewGroup()
	release := make(chan struct{})
	g.Go("parent", func() {
		g.Go("child", func() { <-release })
	})
	done := make(chan []string, 1)
	go func() { done <- g.Wait(supervisor.NewDeadline(long, "x"), nil) }()
	poll.Within(long).Until(t, "child to run alone", func() bool {
		return slices.Equal(g.Running(), []string{"child"})
	})
	close(release)
	if stuck := <-done; stuck != nil {
		t.Fatalf("Wait = %v", stuck)
	}
}

func TestFail(t *testing.T) {
	g := supervisor.NewGroup()
	select {
	case <-g.Failed():
		t.Fatal("Failed closed before any failure")
	default:
	}
	a, b := errors.New("a"), errors.New("b")
	g.Fail(a)
	g.Fail(b) // never blocks
	select {
	case <-g.Failed():
	default:
		t.Fatal("Failed not closed after Fail")
	}
	if err := g.Err(); !errors.Is(err, a) || !errors.Is(err, b) {
		t.Errorf("Err = %v, want both failures", err)
	}
}

func TestDeadlineCut(t *testing.T) {
	t.Run("cut while waiting", func(t *testing.T) {
		d := supervisor.NewDeadline(long, "--controller-shutdown-timeout")
		lost := make(chan struct{})
		d.CutWhen(
			lost,
			func() time.Time { return time.Now().Add(20 * time.Millisecond) },
			"the stop budget (20ms) after the lease was lost",
		)
		never := make(chan struct{})
		done := make(chan bool, 1)
		go func() { done <- d.Wait(never, nil) }()
		close(lost)
		select {
		case ok := <-done:
			if ok {
				t.Fatal("Wait = true for a channel that never closes")
			}
		case <-time.After(long):
			t.Fatal("the cut did not shorten the wait")
		}
		if !d.Cut() || !strings.Contains(d.Limit(), "stop budget") {
			t.Errorf("Cut %v Limit %q", d.Cut(), d.Limit())
		}
	})
	t.Run("cut before waiting", func(t *testing.T) {
		d := supervisor.NewDeadline(long, "x")
		lost := make(chan struct{})
		close(lost)
		d.CutWhen(lost, func() time.Time { return time.Now() }, "cut")
		if d.Wait(make(chan struct{}), nil) {
			t.Fatal("Wait = true")
		}
	})
	t.Run("a cut never extends", func(t *testing.T) {
		d := supervisor.NewDeadline(10*time.Millisecond, "--timeout")
		lost := make(chan struct{})
		close(lost)
		d.CutWhen(lost, func() time.Time { return time.Now().Add(long) }, "cut")
		done := make(chan bool, 1)
		go func() { done <- d.Wait(make(chan struct{}), nil) }()
		select {
		case <-done:
		case <-time.After(long):
			t.Fatal("the cut extended the deadline")
		}
	})
	t.Run("no cut", func(t *testing.T) {
		d := supervisor.NewDeadline(time.Millisecond, "--controller-shutdown-timeout")
		d.Wait(make(chan struct{}), nil)
		if d.Cut() || d.Limit() != "--controller-shutdown-timeout (1ms)" {
			t.Errorf("Cut %v Limit %q", d.Cut(), d.Limit())
		}
	})
}

// One Deadline spans several waits: the clock starts at the first.
func TestDeadlineSpansWaits(t *testing.T) {
	d := supervisor.NewDeadline(20*time.Millisecond, "x")
	closed := make(chan struct{})
	close(closed)
	if !d.Wait(closed, nil) {
		t.Fatal("first Wait on a closed channel = false")
	}
	start := time.Now()
	if d.Wait(make(chan struct{}), nil) {
		t.Fatal("second Wait = true")
	}
	if waited := time.Since(start); waited > long {
		t.Fatalf("second Wait took %v", waited)
	}
}

func TestFailFast(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := supervisor.NewFailFast(cancel)
	boom := errors.New("boom")
	var cancelled atomic.Bool
	g.Go(ctx, func(ctx context.Context) error {
		<-ctx.Done() // ended by the other's failure
		cancelled.Store(true)
		return errors.New("stopped")
	})
	g.Go(ctx, func(context.Context) error { return boom })
	err := g.Wait()
	if !errors.Is(err, boom) || !cancelled.Load() || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("Wait = %v, want both errors after the first cancelled the other", err)
	}
	ok := supervisor.NewFailFast(func() { t.Error("cancelled without a failure") })
	ok.Go(context.Background(), func(context.Context) error { return nil })
	if err := ok.Wait(); err != nil {
		t.Fatalf("Wait = %v", err)
	}
}

// With several cuts (a migration term runs under its own lease and the
// main one), whichever fires first cuts the wait, and the earliest cut
// deadline wins.
func TestDeadlineSeveralCuts(t *testing.T) {
	d := supervisor.NewDeadline(long, "--controller-shutdown-timeout")
	first, second := make(chan struct{}), make(chan struct{})
	d.CutWhen(first, func() time.Time { return time.Now().Add(long) }, "first lease")
	d.CutWhen(
		second,
		func() time.Time { return time.Now().Add(20 * time.Millisecond) },
		"second lease",
	)
	done := make(chan bool, 1)
	go func() { done <- d.Wait(make(chan struct{}), nil) }()
	close(second)
	select {
	case ok := <-done:
		if ok {
			t.Fatal("Wait = true for a channel that never closes")
		}
	case <-time.After(long):
		t.Fatal("the second cut did not shorten the wait")
	}
	if d.Limit() != "second lease" {
		t.Errorf("Limit = %q, want the second cut's", d.Limit())
	}
}
