package manager

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/informers"
)

// warmSet is the informer set a follower keeps synced under warm standby
// (Options.WarmStandby) for the term it would run on winning the lease.
// Exactly one term adopts it (runTerm uses it as the term's set and stops
// it with the term); a set no term adopted is stopped when the campaign
// ends. Only the informers the term's descriptors declare are in it, and
// no controller is built for it: nothing is written.
type warmSet struct {
	set       *informers.Set
	resources []schema.GroupVersionResource
	cancel    context.CancelFunc
	bg        sync.WaitGroup
}

// prepareWarm starts the warm set of a would-be term of states, or returns
// nil when warm standby is off or no descriptor declares an informer. The
// set stops when ctx ends, or earlier with stop.
func (m *Manager) prepareWarm(ctx context.Context, states []*state, lease string) *warmSet {
	if !m.opts.WarmStandby {
		return nil
	}
	var gvrs []schema.GroupVersionResource
	for _, s := range states {
		for _, gvr := range s.desc.Informers() {
			if !slices.Contains(gvrs, gvr) {
				gvrs = append(gvrs, gvr)
			}
		}
	}
	if len(gvrs) == 0 {
		return nil
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("lock", lease)
	set := informers.New(m.client, m.metaClient, informers.Options{Resync: m.resyncPeriod()})
	for _, gvr := range gvrs {
		inf, err := set.ForResource(gvr)
		if err != nil {
			log.Error(err, "Warm standby: cannot keep an informer", "resource", gvr.String())
			continue
		}
		// Declared indexes are built during the LIST, not at takeover.
		shared := inf.Informer()
		for _, s := range states {
			for name, f := range s.desc.Indexers(gvr) {
				if _, ok := shared.GetIndexer().GetIndexers()[name]; ok {
					continue
				}
				if err := shared.AddIndexers(cache.Indexers{name: f}); err != nil {
					log.Error(err, "Warm standby: cannot add a declared index", "resource", gvr.String(), "index", name, "controller", s.desc.Name())
				}
			}
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &warmSet{set: set, resources: gvrs, cancel: cancel}
	set.Start(wctx.Done())
	start := time.Now()
	w.bg.Go(func() {
		if err := set.WaitForCacheSync(wctx); err == nil {
			log.Info("Warm standby: caches synced", "resources", len(gvrs), "took", time.Since(start))
		}
	})
	return w
}

// stop stops the warm set's informers and waits for them.
func (w *warmSet) stop() {
	w.cancel()
	w.bg.Wait()
	w.set.Shutdown()
}
