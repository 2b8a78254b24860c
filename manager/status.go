package manager

import (
	"sync"
	"time"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/leader"
)

// Phase is where a controller is in its life.
type Phase string

// The phases, in the order a controller goes through them.
const (
	// PhaseDisabled: --controllers does not select it.
	PhaseDisabled Phase = "disabled"
	// PhaseSkipped: selected, but a feature gate is off or it is a cloud
	// loop while cloud loops are not included.
	PhaseSkipped Phase = "skipped"
	// PhaseWaiting: selected; no term has built it yet.
	PhaseWaiting Phase = "waiting"
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
	// Reason explains PhaseDisabled and PhaseSkipped.
	Reason string
	// Err is set in PhaseFailed.
	Err error
	// Since is when the controller entered Phase.
	Since time.Time
	// Starts counts how many times Run was called (once per term).
	Starts int
}

// state is the live record of one controller, shared between the term that
// runs it and the health checks that read it.
type state struct {
	desc descriptor.Descriptor
	// lock is the elector whose terms run this controller; nil when it runs
	// without leader election.
	lock *leader.Elector

	mu     sync.Mutex
	status ControllerStatus
	ctrl   descriptor.Controller // set while built in the current term
}

func newState(d descriptor.Descriptor, p Phase, reason string) *state {
	return &state{desc: d, status: ControllerStatus{Name: d.Name(), Phase: p, Reason: reason, Since: time.Now()}}
}

func (s *state) set(p Phase, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.Phase, s.status.Err, s.status.Since = p, err, time.Now()
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

func (s *state) setController(c descriptor.Controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctrl = c
}

func (s *state) snapshot() (ControllerStatus, descriptor.Controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, s.ctrl
}

// skip marks a selected controller as skipped, before any term.
func (s *state) skip(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.Phase, s.status.Reason, s.status.Since = PhaseSkipped, reason, time.Now()
}
