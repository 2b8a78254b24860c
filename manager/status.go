package manager

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/internal/shardgroup"
	"github.com/ctrlhost/ctrlhost/leader"
)

// Phase is where a controller is in its life.
type Phase string

// The phases, in the order a controller goes through them.
const (
	// PhaseDisabled: --controllers (or Manager.SetControllers) does not
	// select it.
	PhaseDisabled Phase = "disabled"
	// PhaseSkipped: selected, but a feature gate is off or it is a cloud
	// loop while cloud loops are not included.
	PhaseSkipped Phase = "skipped"
	// PhaseWaiting: selected; no term has built it yet.
	PhaseWaiting Phase = "waiting"
	// PhaseUnserved: selected, and a term runs it, but the API server does
	// not serve every resource it waits for (WhenServed); Reason says which.
	PhaseUnserved Phase = "unserved"
	// PhaseInitializing: its InitFunc is running.
	PhaseInitializing Phase = "initializing"
	// PhaseNotStarted: its InitFunc returned (nil, nil).
	PhaseNotStarted Phase = "not-started"
	// PhaseStarting: built; waiting for the informers or the start interval.
	PhaseStarting Phase = "starting"
	// PhaseRunning: its Run is executing.
	PhaseRunning Phase = "running"
	// PhaseFinished: Run returned nil before the term ended.
	PhaseFinished Phase = "finished"
	// PhaseFailed: InitFunc or Run returned an error or panicked.
	PhaseFailed Phase = "failed"
	// PhaseStopped: Run returned after the term ended.
	PhaseStopped Phase = "stopped"
)

// ControllerStatus is a snapshot of one controller.
type ControllerStatus struct {
	Name  string
	Phase Phase
	// Reason explains PhaseDisabled, PhaseSkipped and PhaseUnserved.
	Reason string
	// Err is set in PhaseFailed.
	Err error
	// Since is when the controller entered Phase.
	Since time.Time
	// Starts counts how many times Run was called (once per term, or per
	// start of a WhenServed controller; for a sharded controller, once per
	// slot term).
	Starts int
	// Slots lists, for a sharded controller, the slots whose terms run it
	// on this replica now, ascending; its Phase is then that of the slot
	// terms' instances (the first failed one, else the least advanced).
	Slots []int
}

// state is the live record of one controller, shared between the term that
// runs it and the health checks that read it.
type state struct {
	desc descriptor.Descriptor
	// lock is the elector whose terms run this controller; nil when it runs
	// without leader election.
	lock *leader.Elector
	// group is the shard group whose slot terms run this controller (one
	// instance each, with a state of its own in slots); nil unless sharded.
	group *shardgroup.Group

	// enabled is the runtime selection (--controllers, then
	// SetControllers); a term runs the controller only while it is set.
	enabled atomic.Bool
	// fixed, if set, says why SetControllers cannot change enabled: the
	// controller is in no lock group's plan (skipped, sharded while
	// disabled, migrated without the migration lock).
	fixed string

	mu     sync.Mutex
	status ControllerStatus
	ctrl   descriptor.Controller // set while built in the current term
	view   *informers.Set        // its build's view of the current term's informers
	slots  map[int]*state        // sharded: the running slot terms' instances
	// stopClients ends what its build's clients do on the host's behalf
	// (minting its ServiceAccount token) in the current term.
	stopClients context.CancelFunc
}

func newState(d descriptor.Descriptor, p Phase, reason string) *state {
	s := &state{desc: d,
		status: ControllerStatus{Name: d.Name(), Phase: p, Reason: reason, Since: time.Now()}}
	s.enabled.Store(p != PhaseDisabled && p != PhaseSkipped)
	if p == PhaseSkipped {
		s.fixed = reason
	}
	return s
}

func (s *state) set(p Phase, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.Phase, s.status.Err, s.status.Since, s.status.Reason = p, err, time.Now(), ""
	if p == PhaseRunning {
		s.status.Starts++
	}
}

// fail records a failure unless one is already recorded.
func (s *state) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.Phase == PhaseFailed {
		return
	}
	s.status.Phase, s.status.Err, s.status.Since = PhaseFailed, err, time.Now()
}

func (s *state) setInformers(view *informers.Set) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.view = view
}

// setClientsStop records what ends its build's clients' work on the
// host's behalf, and ends the previous build's.
func (s *state) setClientsStop(stop context.CancelFunc) {
	s.mu.Lock()
	prev := s.stopClients
	s.stopClients = stop
	s.mu.Unlock()
	if prev != nil {
		prev()
	}
}

// endClients ends its build's clients' work on the host's behalf: a
// request then waiting for a token fails at once rather than when the
// term ends.
func (s *state) endClients() {
	s.mu.Lock()
	stop := s.stopClients
	s.stopClients = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// takeInformers returns its build's view of the term's informers (whose
// Shutdown removes its handlers and releases its informers), and forgets
// it.
func (s *state) takeInformers() *informers.Set {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.view
	s.view = nil
	return v
}

func (s *state) setController(c descriptor.Controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctrl = c
}

func (s *state) snapshot() (ControllerStatus, descriptor.Controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.slots) == 0 {
		return s.status, s.ctrl
	}
	// A sharded controller: its slot terms' instances, summed up. The
	// controller shown (for its debug handler) is the lowest slot's.
	st, c := s.status, descriptor.Controller(nil)
	rank := func(p Phase) int {
		return slices.Index([]Phase{PhaseFailed, PhaseWaiting, PhaseUnserved, PhaseInitializing,
			PhaseStarting, PhaseRunning,
			PhaseNotStarted, PhaseFinished, PhaseStopped}, p)
	}
	best := -1
	for _, slot := range slices.Sorted(maps.Keys(s.slots)) {
		cs, cc := s.slots[slot].snapshot()
		st.Slots = append(st.Slots, slot)
		st.Starts += cs.Starts
		if c == nil {
			c = cc
		}
		if r := rank(cs.Phase); best < 0 || r < best {
			best, st.Phase, st.Err, st.Since = r, cs.Phase, cs.Err, cs.Since
		}
	}
	return st, c
}

// forSlot returns a new state for this sharded controller's instance in
// slot's term, recorded until dropSlot.
func (s *state) forSlot(slot int) *state {
	c := newState(s.desc, PhaseWaiting, "")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slots == nil {
		s.slots = map[int]*state{}
	}
	s.slots[slot] = c
	return c
}

// dropSlot forgets slot's instance once its term ended, keeping its starts
// and, if it failed, its failure.
func (s *state) dropSlot(slot int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.slots[slot]
	if !ok {
		return
	}
	delete(s.slots, slot)
	st, _ := c.snapshot()
	s.status.Starts += st.Starts
	switch {
	case st.Phase == PhaseFailed:
		s.status.Phase, s.status.Err, s.status.Since = PhaseFailed, st.Err, st.Since
	case s.status.Phase != PhaseFailed:
		s.status.Phase, s.status.Since = PhaseWaiting, time.Now()
	}
}

// slotStates returns the running slot terms' instances by slot.
func (s *state) slotStates() map[int]*state {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.slots)
}

// unserved records that a term waits for the controller's resources to be
// served, unless the controller failed.
func (s *state) unserved(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.status.Phase == PhaseFailed:
		return
	case s.status.Phase == PhaseUnserved && s.status.Reason == reason:
		return
	}
	s.status.Phase, s.status.Reason, s.status.Since = PhaseUnserved, reason, time.Now()
}

// disable records that the controller is not selected (SetControllers),
// unless it failed; a controller disabled already keeps its reason.
func (s *state) disable() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.Phase == PhaseFailed || s.status.Phase == PhaseDisabled {
		return
	}
	s.status.Phase, s.status.Reason, s.status.Since = PhaseDisabled, disabledAtRuntime, time.Now()
}

// disableWaiting records at once that a controller waiting for a term
// (none runs it now: before Run, or on a follower) is disabled; one a term
// runs is recorded by the term once it has stopped.
func (s *state) disableWaiting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.Phase == PhaseWaiting {
		s.status.Phase, s.status.Reason, s.status.Since = PhaseDisabled, disabledAtRuntime, time.Now()
	}
}

// reenable records that a disabled controller is selected again: it
// waits for a term to start it.
func (s *state) reenable() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.Phase == PhaseDisabled {
		s.status.Phase, s.status.Reason, s.status.Since = PhaseWaiting, "", time.Now()
	}
}

// skip marks a selected controller as skipped, before any term.
func (s *state) skip(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.Phase, s.status.Reason, s.status.Since = PhaseSkipped, reason, time.Now()
}
