package manager

import (
	"errors"
	"fmt"
	"time"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/shardgroup"
	"github.com/ctrlhost/ctrlhost/internal/term"
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

// ErrControllerFailed is matched (errors.Is) by the error Run returns when a
// controller's InitFunc or Run failed or panicked: a *ControllerError.
var ErrControllerFailed = errors.New("controller failed")

// ControllerError is how a controller failed: its InitFunc or its Run
// returned an error or panicked. It reads once, `controller "x": InitFunc
// failed: <cause>` (or `Run panicked: <value>`); errors.Is matches
// ErrControllerFailed, and Unwrap gives the cause.
type ControllerError struct {
	Controller string // its canonical name
	Stage      Stage  // where it failed: StageInit or StageRun
	Panicked   bool
	Err        error // what it returned, or the value it panicked with
}

func (e *ControllerError) Error() string {
	verb := "failed"
	if e.Panicked {
		verb = "panicked"
	}
	return fmt.Sprintf("controller %q: %s %s: %v", e.Controller, e.Stage, verb, e.Err)
}

// Unwrap returns the cause.
func (e *ControllerError) Unwrap() error { return e.Err }

// Is reports whether target is ErrControllerFailed.
func (e *ControllerError) Is(target error) bool { return target == ErrControllerFailed }

// Stage is where a controller failed (ControllerError): not a Phase of
// its life, but which of its two calls failed.
type Stage string

// The stages a controller can fail in.
const (
	StageInit Stage = "InitFunc" // its InitFunc
	StageRun  Stage = "Run"      // its Controller's Run
)

// ErrShutdownTimeout is wrapped by the error Run returns when controllers
// did not return within ControllerShutdownTimeout (or, after a lost lease,
// within the lock's stop budget).
var ErrShutdownTimeout = term.ErrShutdownTimeout

// ClientBudget is a per-controller client-side rate limit.
type ClientBudget struct {
	// QPS, 0 for the manager's --kube-api-qps.
	QPS float32
	// Burst, 0 for the manager's --kube-api-burst.
	Burst int32
}

// state is one controller as the Manager planned it: the live record its
// terms keep (term.State), and which lock or shard group runs it.
type state struct {
	*term.State
	// lock is the elector whose terms run this controller; nil when it runs
	// without leader election.
	lock *leader.Elector
	// group is the shard group whose slot terms run this controller (one
	// instance each, with a state of its own); nil unless sharded.
	group *shardgroup.Group
	// fixed, if set, says why SetControllers cannot change its selection:
	// the controller is in no lock group's plan (skipped, sharded while
	// disabled, migrated without the migration lock).
	fixed string
}

func newState(d descriptor.Descriptor, p Phase, reason string) *state {
	s := &state{State: term.NewState(d, term.Phase(p), reason)}
	if p == PhaseSkipped {
		s.fixed = reason
	}
	return s
}

// status is the public snapshot of s, and its controller while a term
// runs it.
func (s *state) status() (ControllerStatus, descriptor.Controller) {
	st, c := s.Snapshot()
	return publicStatus(st), c
}

// publicStatus is st as ControllerStatus.
func publicStatus(st term.Status) ControllerStatus {
	return ControllerStatus{Name: st.Name, Phase: Phase(st.Phase), Reason: st.Reason, Err: st.Err,
		Since: st.Since, Starts: st.Starts, Slots: st.Slots}
}

// records returns the terms' records of states.
func records(states []*state) []*term.State {
	out := make([]*term.State, len(states))
	for i, s := range states {
		out[i] = s.State
	}
	return out
}

// controllerFailure is the Host's term.Failure: a ControllerError, unless
// an InitFunc returned one of its own controller already.
func controllerFailure(controller string, init, panicked bool, err error) error {
	stage := StageRun
	if init {
		stage = StageInit
		if ce := (*ControllerError)(nil); !panicked && errors.As(err, &ce) &&
			ce.Controller == controller {
			return err
		}
	}
	return &ControllerError{controller, stage, panicked, err}
}
