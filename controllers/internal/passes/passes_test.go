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
