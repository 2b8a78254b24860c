package term

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/metrics"
	"github.com/ctrlhost/ctrlhost/internal/supervisor"
	"github.com/ctrlhost/ctrlhost/leader"
)

// runner runs the goroutines of one term (InitFunc calls, controllers' Run
// calls) in a supervisor.Group, so that the term
// can wait for them without a goroutine of its own and name stragglers.
type runner struct {
	*supervisor.Group
	ctx      context.Context // the controllers' context
	log      logr.Logger
	interval time.Duration
	metrics  *metrics.Controllers
	failure  Failure

	mu   sync.Mutex
	runs map[*State]*run // the controllers launched, until stopOne
}

// role is what one of a term's goroutines does for its controller. The
// goroutine is named after the controller and its role (goroutineName),
// which is how the term names it when it does not return in time.
type role int

const (
	roleRun      role = iota // the controller's Run
	roleInit                 // its InitFunc
	roleUnit                 // a unit's start (WhenServed, SetControllers)
	roleStopping             // a unit's stop (SetControllers, unserved)
)

var roleSuffixes = [...]string{
	roleRun:      "",
	roleInit:     " (InitFunc)",
	roleUnit:     " (unit)",
	roleStopping: " (stopping)",
}

// goroutineName names controller's goroutine of role r.
func goroutineName(controller string, r role) string { return controller + roleSuffixes[r] }

// ofController reports whether the goroutine named name is one of
// controller's, in any role.
func ofController(name, controller string) bool {
	for r := range roleSuffixes {
		if name == goroutineName(controller, role(r)) {
			return true
		}
	}
	return false
}

// run is one launched controller: its own context, a child of the
// runner's, so that it can be stopped alone (SetControllers).
type run struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when its Run returned
}

// newRunner returns a runner of controllers on ctx that starts each
// after up to interval of jitter (--controller-start-interval), counts
// them in metrics and makes a failed one's error with failure.
func newRunner(ctx context.Context, log logr.Logger, interval time.Duration,
	metrics *metrics.Controllers, failure Failure) *runner {
	return &runner{Group: supervisor.NewGroup(), ctx: ctx, log: log, interval: interval,
		metrics: metrics, failure: failure, runs: map[*State]*run{}}
}

// stopOne tells s's controller to stop, alone, and returns a channel
// closed when its Run has returned; false if the runner launched none.
func (r *runner) stopOne(s *State) (<-chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	one, ok := r.runs[s]
	if !ok {
		return nil, false
	}
	delete(r.runs, s)
	one.cancel()
	return one.done, true
}

// start runs c in its own goroutine, after the start interval's jitter.
func (r *runner) start(s *State, c descriptor.Controller) { r.launch(s, c, true) }

// startNow runs c in its own goroutine at once, without the jitter; the
// returned channel is closed just before c's Run is called.
func (r *runner) startNow(s *State, c descriptor.Controller) <-chan struct{} {
	return r.launch(s, c, false)
}

func (r *runner) launch(s *State, c descriptor.Controller, jitter bool) <-chan struct{} {
	name := s.Desc.Name()
	running := make(chan struct{})
	ctx, cancel := context.WithCancel(r.ctx)
	one := &run{cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	r.runs[s] = one
	r.mu.Unlock()
	r.Go(goroutineName(name, roleRun), func() {
		defer close(one.done)
		defer cancel()
		if jitter && r.interval > 0 && ctx.Err() == nil {
			t := time.NewTimer(wait.Jitter(r.interval, 1.0))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		r.log.V(1).Info("Starting controller", "controller", name)
		s.set(PhaseRunning, nil)
		r.metrics.Started(name)
		close(running)
		err, panicked := r.run(ctx, name, c)
		r.metrics.Stopped(name)
		if panicked {
			r.metrics.Panicked(name)
		}
		switch {
		case panicked || (err != nil && ctx.Err() == nil):
			r.metrics.Failed(name)
			err = r.failure(name, false, panicked, err)
			r.log.Error(err, "Controller failed", "controller", name)
			s.fail(err)
			r.Fail(err)
		case ctx.Err() == nil:
			r.log.Info("Controller finished before its term ended", "controller", name)
			s.set(PhaseFinished, nil)
		default:
			if err != nil && !errors.Is(err, context.Canceled) {
				r.log.Info("Controller returned an error while stopping", "controller", name,
					"err", err.Error())
			}
			s.set(PhaseStopped, nil)
		}
	})
	return running
}

// run calls c.Run, recovering a panic in that goroutine. Panics in
// goroutines c starts itself are not recovered here (package workloop's
// workers recover their own).
func (r *runner) run(ctx context.Context, name string,
	c descriptor.Controller) (err error, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			err, panicked = panicValue(r.log, name, v), true
		}
	}()
	return c.Run(logr.NewContext(ctx, r.log.WithName(name))), false
}

// wait waits, within stop, for every goroutine of the term, logging the
// laggards, and returns the names of those still running.
func (r *runner) wait(stop *supervisor.Deadline) []string {
	return r.Wait(stop, func(running []string) {
		r.log.Info("Still waiting for controllers to stop", "running", running)
	})
}

// StopBudget is how long a term, or one controller of it, may take to
// stop: --controller-shutdown-timeout (Timeout) on the leader election
// clock (Clock), the clock the leases' StopBy instants are read on.
type StopBudget struct {
	Clock   clock.Clock
	Timeout time.Duration
}

// deadline bounds how long a term stops, on b.Clock: b.Timeout from the
// moment stopping began, cut, the moment one of the leases the term
// runs under is found lost, to that lease's Term.StopBy (another replica
// cannot take it before then), whatever made the term stop. A migration
// term runs under two leases: its own and the main term's.
func (b StopBudget) deadline(log logr.Logger, leases ...*leader.Term) *supervisor.Deadline {
	d := supervisor.NewDeadlineOn(b.Clock, b.Timeout, "--controller-shutdown-timeout")
	for _, lease := range leases {
		if lease == nil {
			continue
		}
		d.CutWhen(lease.Lost(), func() time.Time {
			to := lease.StopBy()
			log.Info("Lease lost; waiting only until another replica could take it",
				"left", to.Sub(b.Clock.Now()).Round(time.Millisecond))
			return to
		}, "the moment the lost lease could pass to another replica (the stop budget)")
	}
	return d
}
