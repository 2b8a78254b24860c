// Package passes runs a controller's periodic work in whole passes, as
// KCM's wait.Until loops do: a pass at once (Run: once the cache has
// synced), and the next a period after each pass ends. Every built-in's
// periodic pass goes through it.
//
// Guarantees: no pass starts before the cache has synced (Run) or once
// ctx is done; passes never overlap; the period counts from the end of a
// pass on the given clock (a fake clock in tests).
//
// Non-guarantees: a pass that is running when ctx ends is not interrupted
// here; the pass itself watches ctx.
package passes

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Run waits for synced, then calls pass at once and again period after
// each call returns, until ctx is done.
func Run(ctx context.Context, clk clock.Clock, synced cache.InformerSynced,
	period time.Duration, pass func(context.Context)) {
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return
	}
	Every(ctx, clk, period, pass)
}

// Every calls pass at once and again period after each call returns, until
// ctx is done: Run for work that reads no cache (a discovery refresh), or
// once the caller waited for its caches itself.
func Every(ctx context.Context, clk clock.Clock, period time.Duration,
	pass func(context.Context)) {
	for ctx.Err() == nil {
		pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-clk.After(period):
		}
	}
}
