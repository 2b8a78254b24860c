package passes

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/internal/poll"
)

// TestRun: nothing before the cache syncs; a pass at once once it has,
// the next only when the period has passed after it; none after ctx ends.
func TestRun(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	var synced atomic.Bool
	var n atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, clk, synced.Load, time.Hour, func(context.Context) { n.Add(1) })
	}()
	if n.Load() != 0 {
		t.Fatal("a pass before the cache synced")
	}
	synced.Store(true)
	poll.Until(t, "the first pass", func() bool { return n.Load() == 1 })
	poll.Until(t, "a wait for the period", clk.HasWaiters)
	clk.Step(time.Hour - time.Second)
	if n.Load() != 1 {
		t.Fatal("a second pass before the period passed")
	}
	clk.Step(time.Second)
	poll.Until(t, "the second pass", func() bool { return n.Load() == 2 })
	cancel()
	select {
	case <-done:
	case <-time.After(poll.Timeout):
		t.Fatal("Run did not return after ctx ended")
	}
	if n.Load() != 2 {
		t.Errorf("%d passes, want 2", n.Load())
	}
}

// TestEveryCountsThePeriodFromAPassEnd: a pass that takes longer delays
// the next by as much (KCM's sliding wait.Until), and none starts once ctx
// is done.
func TestEveryCountsThePeriodFromAPassEnd(t *testing.T) {
	t0 := time.Now()
	clk := clocktesting.NewFakeClock(t0)
	var n atomic.Int32
	var second atomic.Int64 // when the second pass started, after t0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, clk, time.Minute, func(context.Context) {
			switch n.Add(1) {
			case 1:
				clk.Step(10 * time.Second) // the first pass takes ten seconds
			case 2:
				second.Store(int64(clk.Since(t0)))
			}
		})
	}()
	poll.Until(t, "a wait for the period after the first pass", clk.HasWaiters)
	// A minute after the first pass began, but not after it ended: a
	// fixed-rate loop would pass here.
	clk.Step(55 * time.Second)
	clk.Step(5 * time.Second)
	poll.Until(t, "the second pass", func() bool { return n.Load() == 2 })
	if got, want := time.Duration(second.Load()), 70*time.Second; got != want {
		t.Errorf("the second pass began %v after the first, want %v (a period after it ended)",
			got, want)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(poll.Timeout):
		t.Fatal("Every did not return after ctx ended")
	}

	n.Store(0)
	Every(ctx, clk, time.Minute, func(context.Context) { n.Add(1) })
	if n.Load() != 0 {
		t.Error("a pass started with ctx already done")
	}
}
