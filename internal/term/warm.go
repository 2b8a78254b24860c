package term

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/ctrlhost/ctrlhost/internal/served"
	"github.com/ctrlhost/ctrlhost/internal/warmset"
)

// prepareWarm starts the warm informer set (warmset.Set) of a would-be
// term of states under warm standby (Host.WarmStandby): the informers
// and indexes its descriptors declare. It returns nil when warm standby is
// off or nothing is declared. Exactly one term adopts the set (Run
// runs on it and stops it); a set no term adopted is stopped when the
// campaign ends. No controller is built for it: nothing is written.
// Controllers not selected now are left out, and WhenServed ones whose
// resources served does not show served (all of them without a view).
func (h *Host) prepareWarm(ctx context.Context, states []*State, lease string,
	sv *served.View) *warmset.Set {
	if !h.WarmStandby {
		return nil
	}
	var declared []warmset.Declared
	var running []*State
	for _, s := range states {
		unserved := len(s.Desc.Served()) > 0 &&
			(sv == nil || len(sv.Missing(s.Desc.Served())) > 0)
		if !s.Enabled.Load() || unserved {
			// Not selected, or its resources are not served: it builds
			// its informers when it starts (termUnits).
			continue
		}
		running = append(running, s)
		for _, gvr := range s.Desc.Informers() {
			declared = warmset.Declare(declared, s.Desc.Name(), gvr, s.Desc.ObjectType(gvr),
				s.Desc.Indexers(gvr))
		}
	}
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues("lock", lease))
	// The set lives until Stop, not until the campaign's context ends: the
	// term that adopts it stops it once its controllers have stopped (as a
	// term stops a set of its own), and the campaign stops one no term
	// adopted (WarmSlot's stop and replace).
	return warmset.Start(context.WithoutCancel(ctx), h.Clients.Client, h.Clients.Metadata,
		h.informerOptions(h.Clients.Dynamic, running), declared)
}

// WarmSlot holds the warm set a campaign prepared until a term adopts it.
type WarmSlot struct {
	// prepareWarm is Host.prepareWarm; selectionChanged is
	// Host.SelectionChanged.
	prepareWarm      func(context.Context, []*State, string, *served.View) *warmset.Set
	selectionChanged func() <-chan struct{}
	states           []*State
	lease            string
	// served, when the would-be term has WhenServed controllers, is what
	// this replica knows of their resources while it follows: those
	// served are kept warm.
	served *served.View

	mu      sync.Mutex
	warm    *warmset.Set
	leading bool // a term took the set, and none is put back yet
}

// NewWarmSlot returns the warm slot of a campaign for a term of states.
// Under warm standby with WhenServed controllers it asks discovery once
// about their resources (bounded by ctx).
func (h *Host) NewWarmSlot(ctx context.Context, states []*State, lease string) *WarmSlot {
	s := &WarmSlot{prepareWarm: h.prepareWarm, selectionChanged: h.SelectionChanged,
		states: states, lease: lease}
	if !h.WarmStandby || !slices.ContainsFunc(states, func(st *State) bool {
		return len(st.Desc.Served()) > 0
	}) {
		return s
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("lock", lease)
	s.served = served.New(log, h.Clients.Client.Discovery(), h.Clients.Metadata, servedBy(states))
	s.served.Refresh(ctx)
	return s
}

// Prepare starts a warm set for the current selection and served
// resources.
func (s *WarmSlot) Prepare(ctx context.Context) *warmset.Set {
	return s.prepareWarm(ctx, s.states, s.lease, s.served)
}

// servedNow names the selected WhenServed controllers whose resources
// are served now, as the last prepare would have seen them.
func (s *WarmSlot) servedNow() []string {
	var out []string
	for _, st := range s.states {
		served := st.Desc.Served()
		if st.Enabled.Load() && len(served) > 0 && len(s.served.Missing(served)) == 0 {
			out = append(out, st.Desc.Name())
		}
	}
	return out
}

// Put stores w (nil: none) for the next term; it is no longer leading.
func (s *WarmSlot) Put(w *warmset.Set) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.warm, s.leading = w, false
}

// Take hands the set to a term that starts.
func (s *WarmSlot) Take() *warmset.Set {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.warm
	s.warm, s.leading = nil, true
	return w
}

// Stop stops a set no term adopted.
func (s *WarmSlot) Stop() {
	s.mu.Lock()
	w := s.warm
	s.warm = nil
	s.mu.Unlock()
	if w != nil {
		w.Stop()
	}
}

// Follow prepares the set anew whenever SetControllers changes the
// selection while this replica follows, and, with WhenServed controllers,
// whenever discovery shows one's resources come or go (asked at each tick
// of a served.Poller, and at once when a CRD or APIService changes), so
// that the controllers it would start as leader are the ones kept warm,
// until ctx ends.
func (s *WarmSlot) Follow(ctx context.Context) {
	changed := s.selectionChanged()
	var poll <-chan time.Time
	var poller *served.Poller
	kick := make(chan struct{}, 1)
	var last []string
	if s.served != nil {
		var watches sync.WaitGroup
		defer watches.Wait()
		s.served.WatchDefinitions(ctx, &watches, kick)
		poller = s.served.NewPoller()
		defer poller.Stop()
		poll = poller.C()
		last = s.servedNow()
	}
	for {
		if poller != nil {
			poller.Adjust()
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
			// Taken before the set is prepared: a change meanwhile
			// prepares it again.
			changed = s.selectionChanged()
			if s.isLeading() {
				continue // the term applies it; the next set is prepared after it
			}
		case <-poll:
			if s.isLeading() || !s.servedChanged(ctx, &last) {
				continue
			}
		case <-kick:
			if s.isLeading() || !s.servedChanged(ctx, &last) {
				continue
			}
		}
		if s.served != nil {
			last = s.servedNow()
		}
		s.replace(s.Prepare(ctx))
	}
}

// isLeading reports whether a term took the set and none is put back yet.
func (s *WarmSlot) isLeading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leading
}

// servedChanged asks discovery again and reports whether the served
// WhenServed controllers differ from last.
func (s *WarmSlot) servedChanged(ctx context.Context, last *[]string) bool {
	s.served.Refresh(ctx)
	return !slices.Equal(s.servedNow(), *last)
}

// replace makes next the set for the next term, and stops the one it
// replaces; if a term took the set meanwhile, it stops next instead (that
// term started from the selection anyway).
func (s *WarmSlot) replace(next *warmset.Set) {
	s.mu.Lock()
	old := s.warm
	if s.leading {
		old, next = next, nil
	} else {
		s.warm = next
	}
	s.mu.Unlock()
	if old != nil {
		old.Stop()
	}
}
