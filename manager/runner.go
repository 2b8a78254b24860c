package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/metrics"
	"github.com/ctrlhost/ctrlhost/internal/supervisor"
	"github.com/ctrlhost/ctrlhost/leader"
)

// runner runs the goroutines of one term (InitFunc calls, controllers' Run
// calls, the alongside function) in a supervisor.Group, so that the term
// can wait for them without a goroutine of its own and name stragglers.
type runner struct {
	*supervisor.Group
	ctx      context.Context // the controllers' context
	log      logr.Logger
	interval time.Duration
	metrics  *metrics.Controllers
}

func newRunner(ctx context.Context, log logr.Logger, m *Manager) *runner {
	return &runner{Group: supervisor.NewGroup(), ctx: ctx, log: log, interval: m.opts.ControllerStartInterval, metrics: m.metrics}
}

// start runs c in its own goroutine, after the start interval's jitter.
func (r *runner) start(s *state, c descriptor.Controller) {
	name := s.desc.Name()
	r.Go(name, func() {
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
		r.metrics.Stopped(name)
		if panicked {
			r.metrics.Panicked(name)
		}
		switch {
		case panicked || (err != nil && r.ctx.Err() == nil):
			r.metrics.Failed(name)
			err = fmt.Errorf("controller %q: %w: %w", name, ErrControllerFailed, err)
			r.log.Error(err, "Controller failed", "controller", name)
			s.fail(err)
			r.Fail(err)
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
	r.Go(name, func() {
		defer close(done)
		if err := f(ctx); err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
			r.Fail(err)
		}
	})
	return done
}

// wait waits, within stop, for every goroutine of the term, logging the
// laggards, and returns the names of those still running.
func (r *runner) wait(stop *supervisor.Deadline) []string {
	return r.Wait(stop, func(running []string) {
		r.log.Info("Still waiting for controllers to stop", "running", running)
	})
}

// stopDeadline bounds how long a term stops: ControllerShutdownTimeout from
// the moment stopping began, cut, the moment the lease is found lost, to
// what is left of the lock's stop budget after the loss, whatever made the
// term stop.
func stopDeadline(timeout time.Duration, lease *leader.Term, log logr.Logger) *supervisor.Deadline {
	d := supervisor.NewDeadline(timeout, "--controller-shutdown-timeout")
	if lease != nil {
		budget := lease.StopBudget()
		d.CutWhen(lease.Lost(), func() time.Time {
			to := lease.LostAt().Add(budget)
			log.Info("Lease lost; waiting only for what is left of the stop budget",
				"stopBudget", budget, "left", time.Until(to).Round(time.Millisecond))
			return to
		}, fmt.Sprintf("the stop budget (%v) after the lease was lost", budget))
	}
	return d
}
