package manager

import (
	"context"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/informers"
)

// prepareWarm starts the warm informer set (informers.Warm) of a would-be
// term of states under warm standby (Options.WarmStandby): the informers
// and indexes its descriptors declare. It returns nil when warm standby is
// off or nothing is declared. Exactly one term adopts the set (runTerm
// runs on it and stops it); a set no term adopted is stopped when the
// campaign ends. No controller is built for it: nothing is written.
// WhenServed controllers and those not selected now are left out: they
// build informers of their own when they start.
func (m *Manager) prepareWarm(ctx context.Context, states []*state, lease string) *informers.Warm {
	if !m.opts.WarmStandby {
		return nil
	}
	var declared []informers.Declared
	for _, s := range states {
		if len(s.desc.Served()) > 0 || !s.enabled.Load() {
			// Its resources may not be served, or it is not selected: it
			// builds informers of its own when it starts (termUnits).
			continue
		}
		for _, gvr := range s.desc.Informers() {
			i := slices.IndexFunc(declared, func(d informers.Declared) bool { return d.Resource == gvr })
			if i < 0 {
				declared = append(declared, informers.Declared{Resource: gvr, Indexers: map[string]cache.IndexFunc{}})
				i = len(declared) - 1
			}
			declared[i].Users = append(declared[i].Users, s.desc.Name())
			if obj := s.desc.ObjectType(gvr); obj != nil && declared[i].Object == nil {
				declared[i].Object = obj
			}
			for name, f := range s.desc.Indexers(gvr) {
				if _, ok := declared[i].Indexers[name]; !ok {
					declared[i].Indexers[name] = f
				}
			}
		}
	}
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues("lock", lease))
	return informers.StartWarm(ctx, m.client, m.metaClient,
		informers.Options{Resync: m.resyncPeriod(), Dynamic: m.dynClient}, declared)
}

// warmSlot holds the warm set a campaign prepared until a term adopts it.
type warmSlot struct {
	mu      sync.Mutex
	warm    *informers.Warm
	leading bool // a term took the set, and none is put back yet
}

// put stores w (nil: none) for the next term; it is no longer leading.
func (s *warmSlot) put(w *informers.Warm) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.warm, s.leading = w, false
}

// take hands the set to a term that starts.
func (s *warmSlot) take() *informers.Warm {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.warm
	s.warm, s.leading = nil, true
	return w
}

// stop stops a set no term adopted.
func (s *warmSlot) stop() {
	s.mu.Lock()
	w := s.warm
	s.warm = nil
	s.mu.Unlock()
	if w != nil {
		w.Stop()
	}
}

// follow prepares the set anew whenever SetControllers changes the
// selection while this replica follows, so that the controllers it would
// start as leader are the ones kept warm, until ctx ends.
func (s *warmSlot) follow(ctx context.Context, m *Manager, states []*state, lease string) {
	changed := m.selectionChanged()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		// Taken before the set is prepared: a change meanwhile prepares
		// it again.
		changed = m.selectionChanged()
		next := m.prepareWarm(ctx, states, lease)
		s.mu.Lock()
		old := s.warm
		if s.leading {
			old, next = next, nil // a term runs: it starts from the selection anyway
		} else {
			s.warm = next
		}
		s.mu.Unlock()
		if old != nil {
			old.Stop()
		}
	}
}
