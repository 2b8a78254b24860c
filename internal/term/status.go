package term

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/informers"
)

// Phase is where a controller is in its life. The phases and Status are
// manager.Phase and manager.ControllerStatus, value for value (a test in
// package manager keeps them equal); their meaning is documented there.
type Phase string

// The phases, in the order a controller goes through them.
const (
	PhaseDisabled     Phase = "disabled"
	PhaseSkipped      Phase = "skipped"
	PhaseWaiting      Phase = "waiting"
	PhaseUnserved     Phase = "unserved"
	PhaseInitializing Phase = "initializing"
	PhaseNotStarted   Phase = "not-started"
	PhaseStarting     Phase = "starting"
	PhaseRunning      Phase = "running"
	PhaseFinished     Phase = "finished"
	PhaseFailed       Phase = "failed"
	PhaseStopped      Phase = "stopped"
)

// Status is a snapshot of one controller.
type Status struct {
	Name   string
	Phase  Phase
	Reason string
	Err    error
	Since  time.Time
	Starts int
	Slots  []int
}

// State is the live record of one controller, shared between the terms
// that run it and the health checks that read it.
type State struct {
	Desc descriptor.Descriptor
	// Enabled is the runtime selection (--controllers, then
	// SetControllers); a term runs the controller only while it is set.
	Enabled atomic.Bool

	mu     sync.Mutex
	status Status
	ctrl   descriptor.Controller // set while built in the current term
	view   *informers.Set        // its build's view of the current term's informers
	slots  map[int]*State        // sharded: the running slot terms' instances
	// stopClients ends what its build's clients do on the host's behalf
	// (minting its ServiceAccount token) in the current term.
	stopClients context.CancelFunc
}

// NewState returns the record of d in phase p (with reason, for the
// phases that have one); it is enabled unless p is PhaseDisabled or
// PhaseSkipped.
func NewState(d descriptor.Descriptor, p Phase, reason string) *State {
	s := &State{Desc: d,
		status: Status{Name: d.Name(), Phase: p, Reason: reason, Since: time.Now()}}
	s.Enabled.Store(p != PhaseDisabled && p != PhaseSkipped)
	return s
}

func (s *State) set(p Phase, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.Phase, s.status.Err, s.status.Since, s.status.Reason = p, err, time.Now(), ""
	if p == PhaseRunning {
		s.status.Starts++
	}
}

// fail records a failure unless one is already recorded.
func (s *State) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.Phase == PhaseFailed {
		return
	}
	s.status.Phase, s.status.Err, s.status.Since = PhaseFailed, err, time.Now()
}

func (s *State) setInformers(view *informers.Set) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.view = view
}

// setClientsStop records what ends its build's clients' work on the
// host's behalf, and ends the previous build's.
func (s *State) setClientsStop(stop context.CancelFunc) {
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
func (s *State) endClients() {
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
func (s *State) takeInformers() *informers.Set {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.view
	s.view = nil
	return v
}

func (s *State) setController(c descriptor.Controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctrl = c
}

// Snapshot returns the controller's status and, while a term runs it, the
// controller; a sharded controller's sums up its slot terms' instances.
func (s *State) Snapshot() (Status, descriptor.Controller) {
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
		cs, cc := s.slots[slot].Snapshot()
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

// ForSlot returns a new state for this sharded controller's instance in
// slot's term, recorded until dropSlot.
func (s *State) ForSlot(slot int) *State {
	c := NewState(s.Desc, PhaseWaiting, "")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.slots == nil {
		s.slots = map[int]*State{}
	}
	s.slots[slot] = c
	return c
}

// DropSlot forgets slot's instance once its term ended, keeping its starts
// and, if it failed, its failure.
func (s *State) DropSlot(slot int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.slots[slot]
	if !ok {
		return
	}
	delete(s.slots, slot)
	st, _ := c.Snapshot()
	s.status.Starts += st.Starts
	switch {
	case st.Phase == PhaseFailed:
		s.status.Phase, s.status.Err, s.status.Since = PhaseFailed, st.Err, st.Since
	case s.status.Phase != PhaseFailed:
		s.status.Phase, s.status.Since = PhaseWaiting, time.Now()
	}
}

// SlotStates returns the running slot terms' instances by slot.
func (s *State) SlotStates() map[int]*State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.slots)
}

// unserved records that a term waits for the controller's resources to be
// served, unless the controller failed.
func (s *State) unserved(reason string) {
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
func (s *State) disable() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.Phase == PhaseFailed || s.status.Phase == PhaseDisabled {
		return
	}
	s.status.Phase, s.status.Reason, s.status.Since = PhaseDisabled, DisabledAtRuntime, time.Now()
}

// DisableWaiting records at once that a controller waiting for a term
// (none runs it now: before Run, or on a follower) is disabled; one a term
// runs is recorded by the term once it has stopped.
func (s *State) DisableWaiting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.Phase == PhaseWaiting {
		s.status.Phase, s.status.Reason, s.status.Since = PhaseDisabled, DisabledAtRuntime, time.Now()
	}
}

// Reenable records that a disabled controller is selected again: it
// waits for a term to start it.
func (s *State) Reenable() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.Phase == PhaseDisabled {
		s.status.Phase, s.status.Reason, s.status.Since = PhaseWaiting, "", time.Now()
	}
}

// Skip marks a selected controller as skipped, before any term.
func (s *State) Skip(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.Phase, s.status.Reason, s.status.Since = PhaseSkipped, reason, time.Now()
}
