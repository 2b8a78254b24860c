package term

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/internal/metrics"
	"github.com/ctrlhost/ctrlhost/internal/served"
	"github.com/ctrlhost/ctrlhost/internal/supervisor"
	"github.com/ctrlhost/ctrlhost/internal/warmset"
	"github.com/ctrlhost/ctrlhost/leader"
)

// termUnits starts and stops one term's controllers while the term runs:
// WhenServed controllers as discovery serves and removes their resources,
// and any controller as SetControllers enables and disables it.
//
// The controllers the term built at its start (selected then, and not
// WhenServed) run on the term's informers; one of them that is disabled is
// told to stop alone and waited for within the term's stop bound. Every
// other start is a unit: the controller built and started on its own. Each
// controller's informers are counted as its own in the term's set
// (informers.Set.For): once one has stopped, the event handlers it added
// are removed and its informers released, so that those no other
// controller holds stop and their caches are freed, while shared ones go
// on. A unit's goroutine runs on the term's runner, so the term's stop
// waits for it (and names it if it does not return); a unit's controller
// that fails fails the term, as any controller does.
type termUnits struct {
	// build builds a unit's controller, as the term builds its own.
	build func(ctx context.Context, log logr.Logger, s *State, env termEnv, r *runner,
		view *informers.Set) (descriptor.Controller, error)
	host          kubernetes.Interface // writes a unit's events when its own client fails
	startInterval time.Duration        // --controller-start-interval
	metrics       *metrics.Controllers
	stop          StopBudget // how long a stopped unit may take
	log           logr.Logger
	env           termEnv        // the term's: its ctx ends when the controllers are told to stop
	r             *runner        // the term's
	leases        []*leader.Term // the term's lease and its parent's: a lost one cuts a stop
	// warm, if set, is the warm set the term adopted: it holds the
	// informers each controller declared until the controller stops or is
	// found not to run (releaseIdle).
	warm   *warmset.Set
	states []*State // every controller of the term
	served *served.View
	kick   chan struct{} // a change of selection: reconcile now
	// cleanups are the shutdowns of stopped controllers' informers.
	cleanups sync.WaitGroup

	mu      sync.Mutex
	closed  bool             // the term is stopping: nothing starts
	static  map[*State]bool  // built by the term at its start, and not stopped since
	running map[*State]*unit // started or stopping units, and static ones stopping
}

// unit is one start of a controller outside the term's first build, or
// the stop of one of the term's own.
type unit struct {
	cancel context.CancelFunc
	set    *informers.Set // its view of the term's informers, released once it stopped
	done   chan struct{}  // closed once it stopped and its informers are released
	// why, set (under termUnits.mu) when it is told to stop for a reason
	// of its own, becomes its phase (and Reason) once it has stopped.
	why struct {
		phase  Phase
		reason string
	}
}

func (h *Host) newTermUnits(log logr.Logger, env termEnv, r *runner, warm *warmset.Set,
	leases []*leader.Term, states, static []*State) *termUnits {
	u := &termUnits{build: h.build, host: h.Clients.Client, startInterval: h.StartInterval,
		metrics: h.Metrics, stop: h.Stop,
		log: log, env: env, r: r, warm: warm, leases: leases, states: states,
		served: served.New(log, h.Clients.Client.Discovery(), h.Clients.Metadata, servedBy(states)),
		kick:   make(chan struct{}, 1), static: map[*State]bool{}, running: map[*State]*unit{}}
	for _, s := range static {
		u.static[s] = true
	}
	return u
}

// servedBy lists the resources the WhenServed controllers of states wait
// for.
func servedBy(states []*State) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, s := range states {
		out = append(out, s.Desc.Served()...)
	}
	return out
}

// reselect asks the term to apply a change of selection now.
func (u *termUnits) reselect() {
	if u == nil {
		return
	}
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

// watch starts and stops controllers until ctx ends: at once, whenever the
// selection changes, and, with WhenServed controllers, at each tick of a
// served.Poller and whenever a CRD or APIService changes.
func (u *termUnits) watch(ctx context.Context) {
	var watches sync.WaitGroup
	defer watches.Wait()
	var poll <-chan time.Time
	var poller *served.Poller
	if !u.served.Empty() {
		u.served.WatchDefinitions(ctx, &watches, u.kick)
		poller = u.served.NewPoller()
		defer poller.Stop()
		poll = poller.C()
	}
	for {
		u.served.Refresh(ctx)
		if poller != nil {
			poller.Adjust()
		}
		u.reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case <-poll:
		case <-u.kick:
		}
	}
}

// reconcile starts every controller that should run and does not, and
// stops every one that runs and should not.
func (u *termUnits) reconcile(ctx context.Context) {
	for _, s := range u.states {
		if ctx.Err() != nil {
			return
		}
		enabled := s.Enabled.Load()
		var missing []string
		if enabled {
			missing = u.served.Missing(s.Desc.Served())
		}
		u.mu.Lock()
		static, un := u.static[s], u.running[s]
		u.mu.Unlock()
		name := s.Desc.Name()
		switch {
		case static && !enabled:
			u.log.Info("Stopping controller: disabled at runtime", "controller", name)
			u.stopStatic(s)
		case static || un != nil && enabled && len(missing) == 0:
			// Runs as it should (a unit stopping for an earlier reason is
			// started again once it has stopped).
		case un != nil:
			u.tellToStop(s, un, enabled, missing)
		case !enabled:
			s.disable()
			u.releaseIdle(s)
		case len(missing) > 0:
			s.unserved("not served: " + strings.Join(missing, ", "))
			u.releaseIdle(s)
		default:
			why := "enabled at runtime"
			if len(s.Desc.Served()) > 0 {
				why = "the resources it waits for are served"
			}
			u.log.Info("Starting controller: "+why, "controller", name)
			u.start(s)
		}
	}
}

// releaseIdle releases what the term's warm set holds for a controller
// that does not run: the informers it declared (a follower kept them warm
// while its resources were served; they went, or it was disabled, before
// it started).
func (u *termUnits) releaseIdle(s *State) {
	if u.warm != nil {
		u.warm.Release(s.Desc.Name())
	}
}

// releaseUnstarted releases what a controller whose InitFunc chose not to
// start it holds: the informers it requested (view), and what the warm set
// holds for its declarations. Nothing of it will run in this term, so
// informers only it wanted stop (or never start), as for a controller that
// stopped.
func (u *termUnits) releaseUnstarted(s *State, view *informers.Set) {
	if view != nil {
		view.Shutdown()
	}
	u.releaseIdle(s)
}

// tellToStop stops a running unit that should not run, unless it was told
// already.
func (u *termUnits) tellToStop(s *State, un *unit, enabled bool, missing []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if un.why.phase != "" {
		return
	}
	// Keys sent to it from now on are held for its next start: the queue
	// it handed them to is about to shut down.
	u.env.queues.Forget(s.Desc.Name())
	if !enabled {
		un.why.phase, un.why.reason = PhaseDisabled, DisabledAtRuntime
		u.log.Info("Stopping controller: disabled at runtime", "controller", s.Desc.Name())
	} else {
		un.why.phase, un.why.reason = PhaseUnserved, "not served: "+strings.Join(missing, ", ")
		u.log.Info("Stopping controller: a resource it needs is no longer served",
			"controller", s.Desc.Name(), "missing", missing)
	}
	un.cancel()
}

// DisabledAtRuntime is the Reason of a controller SetControllers disabled.
const DisabledAtRuntime = "disabled at runtime (Manager.SetControllers)"

// close keeps anything from starting: the term is stopping, and its
// runner takes no new goroutine once it waits for them.
func (u *termUnits) close() {
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
}

// stopStatic tells one of the term's own controllers to stop and waits for
// it, on the term's runner, within the term's stop bound. Once it has
// stopped, the event handlers it added are removed and its informers
// released: those the term's other controllers share stay.
func (u *termUnits) stopStatic(s *State) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return
	}
	delete(u.static, s)
	u.env.queues.Forget(s.Desc.Name())
	stopped, ok := u.r.stopOne(s)
	// A request of its Run waiting for a token minted on the term's
	// context would hold it past its stop bound (simulation seed 832).
	s.endClients()
	if !ok {
		// Its InitFunc chose not to start it: nothing runs, and what it
		// held was released when it chose so (releaseUnstarted); this
		// releases it again, in case.
		s.disable()
		view := s.takeInformers()
		u.cleanups.Go(func() { u.releaseUnstarted(s, view) })
		return
	}
	un := &unit{cancel: func() {}, set: s.takeInformers(), done: make(chan struct{})}
	un.why.phase, un.why.reason = PhaseDisabled, DisabledAtRuntime
	u.running[s] = un
	u.r.Go(goroutineName(s.Desc.Name(), roleStopping), func() {
		u.finish(s, un, func(stop *supervisor.Deadline) []string {
			if stop.Wait(stopped, nil) {
				return nil
			}
			return []string{s.Desc.Name()}
		}, func() <-chan struct{} { return stopped }, func() {})
	})
}

// start builds and runs s as a new unit, unless the term is stopping.
func (u *termUnits) start(s *State) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return
	}
	uctx, cancel := context.WithCancel(u.env.ctx)
	// The set is the term's, seen as this controller (build sees it so
	// too): what it requests is counted as its own, and released with it.
	un := &unit{cancel: cancel, set: u.env.set.For(s.Desc.Name()), done: make(chan struct{})}
	u.running[s] = un
	u.r.Go(goroutineName(s.Desc.Name(), roleUnit), func() {
		defer cancel()
		env := u.env
		env.ctx, env.started = uctx, make(chan struct{})
		env.events = &termEvents{host: u.host, log: u.log, gate: u.env.gate}
		ur := newRunner(uctx, u.log, u.startInterval, u.metrics, u.r.failure)
		c, err := u.build(uctx, u.log, s, env, ur, un.set)
		switch {
		case errors.Is(err, errStopping):
		case err != nil:
			u.r.Fail(err)
		case c == nil:
			u.releaseUnstarted(s, un.set)
		default:
			un.set.Start(uctx.Done())
			close(env.started)
			ur.startNow(s, c)
		}
		select {
		case <-env.started:
		default:
			close(env.started)
		}
		select {
		case <-uctx.Done():
		case <-ur.Failed():
			u.r.Fail(ur.Err())
		}
		cancel()
		u.finish(s, un, ur.wait, ur.Idle, func() {
			flush, cancelFlush := context.WithTimeout(context.WithoutCancel(u.env.ctx),
				eventFlushTimeout)
			defer cancelFlush()
			env.events.stop(flush)
		})
	})
}

// finish waits, within the term's stop bound, for a stopping controller
// (wait reports what still runs after the bound), and fails the term if it
// did not stop in time (waiting on for idle, as the term names it among
// its stragglers meanwhile). Then, off the term's runner (the stop budget
// is for the controller alone; the gate refuses its events once the lease
// is lost), it flushes its events, releases its informers (removing its
// handlers), forgets it, and records why it stopped; the term waits for that before
// it returns (waitCleanups).
func (u *termUnits) finish(s *State, un *unit, wait func(*supervisor.Deadline) []string,
	idle func() <-chan struct{}, flush func()) {
	name := s.Desc.Name()
	log := u.log.WithValues("controller", name)
	stop := u.stop.deadline(log, u.leases...)
	cleanup := u.cleanups.Go
	if stuck := wait(stop); len(stuck) > 0 {
		err := fmt.Errorf("controller %q: %w: still running after %s: %v", name, ErrShutdownTimeout,
			stop.Limit(), stuck)
		s.fail(err)
		u.r.Fail(err)
		<-idle()
		// The term may have returned meanwhile, done with its cleanups.
		cleanup = func(f func()) { f() }
	}
	cleanup(func() {
		defer close(un.done)
		flush()
		if un.set != nil {
			un.set.Shutdown()
		}
		u.releaseIdle(s) // the warm set's hold on its declarations, too
		s.setController(nil)
		u.env.queues.Forget(name)
		u.mu.Lock()
		if u.running[s] == un {
			delete(u.running, s) // forgotten at once, so that its caches can be freed
		}
		why := un.why
		u.mu.Unlock()
		switch why.phase {
		case PhaseDisabled:
			s.disable()
		case PhaseUnserved:
			s.unserved(why.reason)
		}
		log.Info("Controller stopped")
		u.reselect() // the selection may have changed back meanwhile
	})
}

// waitCleanups waits until every stopped controller's informers are shut
// down (finish).
func (u *termUnits) waitCleanups() { u.cleanups.Wait() }
