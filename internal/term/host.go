package term

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/internal/metrics"
	"github.com/ctrlhost/ctrlhost/internal/shardgroup"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Host is what every term of one host shares: its clients, the options its
// terms read, its metrics, and the record of every controller. A Manager
// makes one at Build and runs each term through it (Run). Its fields are
// set before the first term and not changed after.
type Host struct {
	Clients *Clients
	// StartInterval is --controller-start-interval; MinResyncPeriod is
	// --min-resync-period; Stop is how long a term's controllers may take
	// to stop.
	StartInterval   time.Duration
	MinResyncPeriod time.Duration
	Stop            StopBudget
	// WarmStandby: a follower keeps its would-be term's declared informers
	// synced (NewWarmSlot).
	WarmStandby bool
	Metrics     *metrics.Controllers
	Registry    *prometheus.Registry
	FeatureGate featuregate.FeatureGate
	// States records every registered controller, by canonical name: what
	// each declared it reads shapes every informer set.
	States map[string]*State
	// Failure makes a failed controller's error.
	Failure Failure
	// SelectionChanged returns a channel closed by the next change of
	// selection (Manager.SetControllers).
	SelectionChanged func() <-chan struct{}

	termsMu sync.Mutex
	terms   map[*term]struct{} // running terms
}

func (h *Host) addTerm(t *term) {
	h.termsMu.Lock()
	defer h.termsMu.Unlock()
	if h.terms == nil {
		h.terms = map[*term]struct{}{}
	}
	h.terms[t] = struct{}{}
}

func (h *Host) removeTerm(t *term) {
	h.termsMu.Lock()
	defer h.termsMu.Unlock()
	delete(h.terms, t)
}

// runningTerms returns the terms running now.
func (h *Host) runningTerms() []*term {
	h.termsMu.Lock()
	defer h.termsMu.Unlock()
	out := make([]*term, 0, len(h.terms))
	for t := range h.terms {
		out = append(out, t)
	}
	return out
}

// Reselect tells every running term to apply a change of selection now:
// it starts the controllers enabled since, and stops those disabled.
func (h *Host) Reselect() {
	for _, t := range h.runningTerms() {
		t.units.reselect()
	}
}

// Sync is whether one running term's informers synced.
type Sync struct {
	Term string
	Slot bool  // a slot term of a shard group
	Err  error // nil once every informer it started synced
}

// Synced reports, for each running term, whether its informers started
// and every one started synced (those of controllers it started later
// included: they are the term's).
func (h *Host) Synced() []Sync {
	terms := h.runningTerms()
	out := make([]Sync, 0, len(terms))
	for _, t := range terms {
		out = append(out, Sync{Term: t.name, Slot: t.slot, Err: t.set.Synced()})
	}
	return out
}

// Slot makes a term a slot term of a shard group: its informers hold only
// the slot's objects, and its controllers' clients share rate limiters
// with the group's other slot terms.
type Slot struct {
	// Client is what the term's informers list and watch through: a
	// shardgroup.Clientset of the slot.
	Client kubernetes.Interface
	// Dynamic is the same for dynamic and custom informers: a
	// shardgroup.Dynamic; nil without one.
	Dynamic  dynamic.Interface
	Limiters *shardgroup.Limiters // shared with the group's other slot terms
	Space    shard.Space
	Index    int // the slot
}

// rateLimiters returns the shared rate limiters; nil outside slot terms.
func (t *Slot) rateLimiters() *shardgroup.Limiters {
	if t == nil {
		return nil
	}
	return t.Limiters
}

// scope returns a controller's descriptor.Context.Shard: a Scope of its
// own; nil outside slot terms.
func (t *Slot) scope() *shard.Scope {
	if t == nil {
		return nil
	}
	return &shard.Scope{Space: t.Space, Slots: []int{t.Index}}
}
