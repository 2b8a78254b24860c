// Package passes runs a controller's work in whole passes over its cache,
// as KCM's cleaners do: a pass once the cache has synced, and the next a
// period after each pass ends.
//
// Guarantees: no pass starts before the cache has synced or after ctx is
// done; passes never overlap; the period counts from the end of a pass on
// the given clock (a fake clock in tests).
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
	for {
		pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-clk.After(period):
		}
	}
}
