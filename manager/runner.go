package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/metrics"
)

// runner owns the goroutines of one term: InitFunc calls, controllers' Run
// calls and the alongside function. Each is tracked by name until it
// returns, so that the term can wait for all of them without a goroutine of
// its own and name those that did not return.
type runner struct {
	ctx      context.Context
	log      logr.Logger
	interval time.Duration
	metrics  *metrics.Controllers
	failed   chan struct{} // one send per failure; sized so no sender blocks

	mu      sync.Mutex
	running []string
	sealed  bool          // wait began: nothing new is tracked from the term itself
	idle    chan struct{} // closed once sealed and nothing runs
	errs    []error
}

func newRunner(ctx context.Context, log logr.Logger, m *Manager, failures int) *runner {
	return &runner{
		ctx:      ctx,
		log:      log,
		interval: m.opts.ControllerStartInterval,
		metrics:  m.metrics,
		failed:   make(chan struct{}, failures),
		idle:     make(chan struct{}),
	}
}

// track runs f on a goroutine listed under name until it returns.
func (r *runner) track(name string, f func()) {
	r.mu.Lock()
	r.running = append(r.running, name)
	r.mu.Unlock()
	go func() {
		defer r.finished(name)
		f()
	}()
}

func (r *runner) finished(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := slices.Index(r.running, name); i >= 0 {
		r.running = slices.Delete(r.running, i, i+1)
	}
	if r.sealed && len(r.running) == 0 {
		close(r.idle)
	}
}

// fail records a failure that ends the term.
func (r *runner) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	r.failed <- struct{}{}
}

// start runs c in its own goroutine, after the start interval's jitter.
func (r *runner) start(s *state, c descriptor.Controller) {
	name := s.desc.Name()
	r.track(name, func() {
		if r.interval > 0 && r.ctx.Err() == nil {
			t := time.NewTimer(wait.Jitter(r.interval, 1.0))
			select {
			case <-t.C:
			case <-r.ctx.Done():
				t.Stop()
			}
		}
		r.log.V(1).Info("Starting controller", "controller", name)
		s.set(PhaseRunning, nil)
		r.metrics.Started(name)
		err, panicked := r.run(name, c)
		r.metrics.Running(name, false)
		if panicked {
			r.metrics.Panicked(name)
		}
		switch {
		case panicked || (err != nil && r.ctx.Err() == nil):
			r.metrics.Failed(name)
			err = fmt.Errorf("controller %q: %w: %w", name, ErrControllerFailed, err)
			r.log.Error(err, "Controller failed", "controller", name)
			s.fail(err)
			r.fail(err)
		case r.ctx.Err() == nil:
			r.log.Info("Controller finished before its term ended", "controller", name)
			s.set(PhaseFinished, nil)
		default:
			if err != nil && !errors.Is(err, context.Canceled) {
				r.log.Info("Controller returned an error while stopping", "controller", name, "err", err.Error())
			}
			s.set(PhaseStopped, nil)
		}
	})
}

// run calls c.Run, recovering a panic in that goroutine. Panics in
// goroutines c starts itself are not recovered here (package workloop's
// workers recover their own).
func (r *runner) run(name string, c descriptor.Controller) (err error, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			err, panicked = panicError(r.log, name, "Run", v), true
		}
	}()
	return c.Run(logr.NewContext(r.ctx, r.log.WithName(name))), false
}

// alongside runs f under ctx; an error other than the context's own ends
// the term. The returned channel is closed when f returned.
func (r *runner) alongside(ctx context.Context, name string, f func(context.Context) error) <-chan struct{} {
	done := make(chan struct{})
	r.track(name, func() {
		defer close(done)
		if err := f(ctx); err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
			r.fail(err)
		}
	})
	return done
}

// wait waits, within stop's deadline, for every tracked goroutine to
// return, and returns the names of those still running.
func (r *runner) wait(stop *stopDeadline) []string {
	r.mu.Lock()
	r.sealed = true
	if len(r.running) == 0 {
		close(r.idle)
	}
	r.mu.Unlock()
	if stop.wait(r.idle, r.stillRunning) {
		return nil
	}
	return r.stillRunning()
}

func (r *runner) stillRunning() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.running)
	slices.Sort(out)
	return out
}

func (r *runner) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// stopDeadline bounds how long a term stops: ControllerShutdownTimeout from
// the moment stopping began, cut, the moment the lease is found lost, to
// what is left of the lock's stop budget after the loss, whatever made the
// term stop. Its clock starts at the first wait. It is used by one
// goroutine.
type stopDeadline struct {
	timeout time.Duration
	lease   *leader.Term // nil without leader election
	log     logr.Logger

	began    time.Time
	deadline time.Time
	lostSeen bool
}

func newStopDeadline(timeout time.Duration, lease *leader.Term, log logr.Logger) *stopDeadline {
	return &stopDeadline{timeout: timeout, lease: lease, log: log}
}

// cutForLoss applies the stop budget once the lease was lost.
func (s *stopDeadline) cutForLoss() {
	if s.lostSeen || s.lease == nil || s.lease.LostAt().IsZero() {
		return
	}
	s.lostSeen = true
	if d := s.lease.LostAt().Add(s.lease.StopBudget()); d.Before(s.deadline) {
		s.deadline = d
		s.log.Info("Lease lost while stopping; waiting only for what is left of the stop budget",
			"stopBudget", s.lease.StopBudget(), "left", time.Until(d).Round(time.Millisecond))
	}
}

// wait waits until done is closed (true) or the deadline passed (false),
// logging the names running() gives every third of the timeout.
func (s *stopDeadline) wait(done <-chan struct{}, running func() []string) bool {
	if s.began.IsZero() {
		s.began = time.Now()
		s.deadline = s.began.Add(s.timeout)
	}
	var lost <-chan struct{}
	if s.lease != nil {
		lost = s.lease.Lost()
	}
	tick := time.NewTicker(max(s.timeout/3, time.Millisecond))
	defer tick.Stop()
	for {
		s.cutForLoss()
		if s.lostSeen {
			lost = nil
		}
		timer := time.NewTimer(time.Until(s.deadline))
		select {
		case <-done:
			timer.Stop()
			return true
		case <-lost:
			timer.Stop()
		case <-tick.C:
			timer.Stop()
			if running != nil {
				s.log.Info("Still waiting for controllers to stop", "running", running())
			}
		case <-timer.C:
			select {
			case <-done: // both ready: done wins
				return true
			default:
				return false
			}
		}
	}
}

// limit describes the bound that applied, for error messages.
func (s *stopDeadline) limit() string {
	if s.lostSeen {
		return fmt.Sprintf("the stop budget (%v) after the lease was lost", s.lease.StopBudget())
	}
	return fmt.Sprintf("--controller-shutdown-timeout (%v)", s.timeout)
}
