package term

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/fence"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/internal/queues"
	"github.com/ctrlhost/ctrlhost/internal/warmset"
	"github.com/ctrlhost/ctrlhost/leader"
)

// restMapperResetPeriod is how often a term forgets discovery, as KCM does,
// so that API groups installed later are found.
const restMapperResetPeriod = 30 * time.Second

// term is one run of a group of controllers over one informer set.
type term struct {
	name  string
	set   *informers.Set
	slot  bool // a slot term of a shard group
	units *termUnits
}

// Failure makes the error of controller's failure: its InitFunc (init) or
// its Run returned err, or panicked with it (panicked). The Manager makes
// its public ControllerError.
type Failure func(controller string, init, panicked bool, err error) error

// ErrShutdownTimeout is wrapped by the error Run returns when controllers
// did not return within the stop budget (--controller-shutdown-timeout,
// or, after a lost lease, what is left of the lock's stop budget).
var ErrShutdownTimeout = errors.New("controllers did not stop in time")

// Spec says what one term runs.
type Spec struct {
	Name   string
	States []*State
	// Alongside, if set, runs once the StartFirst controllers run and before
	// any other InitFunc is called, under the term's context, which ends
	// when the term's controllers are told to stop. The term always waits
	// for it to return before it returns itself (so its lease outlives
	// Alongside's), and its return before the term ends (an error, or a
	// lost lease of its own) ends the term. The main term runs the
	// migration campaign this way.
	Alongside func(ctx context.Context) error
	// Warm, if set, is the informer set the term runs on (warm standby):
	// already started and usually synced. The term stops it when it ends.
	Warm *warmset.Set
	// Slot, if set, makes this a slot term of a shard group.
	Slot *Slot
	// Parent, if set, is the lease of the term this one runs inside (the
	// main term's, for the migration term): losing it cuts this term's stop
	// as losing its own does.
	Parent *leader.Term
}

// termEnv is what the term hands every InitFunc of one term.
type termEnv struct {
	ctx     context.Context // the controllers' context: it ends when they are told to stop
	set     *informers.Set
	mapper  meta.ResettableRESTMapper
	gate    *fence.Gate   // nil: writes are not fenced
	started chan struct{} // InformersStarted
	slot    *Slot         // nil unless a slot term
	events  *termEvents
	queues  *queues.Term
}

// errStopping is initAll's answer when the term began stopping before
// every InitFunc was called: the rest are not called.
var errStopping = errors.New("the term is stopping")

// eventFlushTimeout bounds how long a stopping term waits for event writes
// in flight after its controllers returned, before it cancels them.
const eventFlushTimeout = time.Second

// Run builds and runs spec's controllers until ctx is done or one of
// them fails, then stops them (bounded) and shuts the informers down.
//
// Order: StartFirst controllers are built and their Run called, one by
// one, before anything else; then alongside starts; then every other
// InitFunc runs, unless the term is stopping by then; then the informers
// start and InformersStarted closes; then every other controller's Run
// starts in its own goroutine. On a warm set (warm standby) each
// controller's Run starts as soon as its InitFunc returned instead, before
// InformersStarted. A term that ends before its informers could start (an
// InitFunc failed, or the term stopped first) closes InformersStarted
// anyway, with the term's context already done, so that a controller
// waiting on it returns.
//
// Stop: the controllers and alongside are told to stop at once, both
// bounded by the stop deadline (cut, when the lease or the parent's is
// lost, to when it can pass to another replica); the term returns, and so
// releases its lease, only after alongside returned.
func (h *Host) Run(ctx context.Context, spec Spec) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("term", spec.Name)
	termCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lease := leader.TermFrom(ctx) // nil without leader election

	// Controllers stop when the term tells them to, not when its parent
	// context ends: the migration term ends first.
	ctrlCtx, cancelCtrl := context.WithCancel(context.WithoutCancel(termCtx))
	defer cancelCtrl()
	env := h.newTermEnv(ctrlCtx, log, spec, lease)
	r := newRunner(ctrlCtx, log, h.StartInterval, h.Metrics, h.Failure)
	t := &term{name: spec.Name, set: env.set, slot: spec.Slot != nil}
	static := spec.static()
	leases := []*leader.Term{lease, spec.Parent}
	t.units = h.newTermUnits(log, env, r, spec.Warm, leases, spec.States, static.States)
	h.addTerm(t)
	defer h.removeTerm(t)

	var bg sync.WaitGroup
	bg.Go(func() { wait.Until(env.mapper.Reset, restMapperResetPeriod, termCtx.Done()) })

	stop := h.Stop.deadline(log, lease, spec.Parent)
	log.Info("Starting controllers", "count", len(spec.States), "warmCaches", spec.Warm != nil)

	al, later, initErr := h.startTerm(termCtx, log, static, env, r, t, &bg)
	// The controllers and alongside are told to stop at once.
	cancel(errors.New("term ended"))
	t.units.close()
	cancelCtrl()
	select {
	case <-env.started:
	default:
		close(env.started)
	}
	// Every built controller gets its Run call, here with a done context,
	// so it can release what its InitFunc acquired.
	for _, b := range later {
		r.start(b.s, b.c)
	}

	stuck := r.wait(stop)
	var alErr error
	if al != nil {
		// Bounded: its own term stops by the same deadline, and it releases
		// its lease within one request.
		<-al.done
		alErr = al.err
	}
	flush, cancelFlush := context.WithTimeout(context.WithoutCancel(ctx), eventFlushTimeout)
	env.events.stop(flush)
	cancelFlush()
	bg.Wait()
	t.units.waitCleanups()
	if spec.Warm != nil {
		spec.Warm.Stop()
	} else {
		env.set.Shutdown()
	}
	stuckErr := settle(log, spec.States, stuck, stop.Limit())
	return errors.Join(initErr, r.Err(), alErr, stuckErr)
}

// newTermEnv makes what spec's term hands its InitFuncs: its informer set
// (the warm one, or a new one over the slot's clients in a slot term), its
// write gate (lease's; none without leader election), event recorders and
// queues.
func (h *Host) newTermEnv(ctrlCtx context.Context, log logr.Logger, spec Spec,
	lease *leader.Term) termEnv {
	env := termEnv{
		ctx: ctrlCtx,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(
			memory.NewMemCacheClient(h.Clients.Client.Discovery())),
		started: make(chan struct{}),
		slot:    spec.Slot,
	}
	if spec.Warm != nil {
		env.set = spec.Warm.Informers()
	} else {
		client, dyn := kubernetes.Interface(h.Clients.Client), h.Clients.Dynamic
		if spec.Slot != nil {
			client, dyn = spec.Slot.Client, spec.Slot.Dynamic
		}
		// The informers the term's first build requests are made before
		// they start, and widen to what each holder reads; a WhenServed
		// controller comes later, and is anticipated.
		var later []*State
		for _, s := range spec.States {
			if len(s.Desc.Served()) > 0 {
				later = append(later, s)
			}
		}
		env.set = informers.New(client, h.Clients.Metadata, h.informerOptions(dyn, later))
	}
	if lease != nil {
		env.gate = lease.Gate()
	}
	env.events = &termEvents{host: h.Clients.Client, log: log, gate: env.gate}
	env.queues = queues.New(namesOf(spec.States))
	return env
}

// static is the part of spec its term builds at start: the controllers
// selected now, WhenServed ones excepted. The term's units start and stop
// the others, and these, as the selection and discovery change.
func (spec Spec) static() Spec {
	static := spec
	static.States = nil
	for _, s := range spec.States {
		if s.Enabled.Load() && len(s.Desc.Served()) == 0 {
			static.States = append(static.States, s)
		}
	}
	return static
}

// startTerm builds static's controllers (initAll), starts the informers
// and every controller built, and waits until the term is told to stop, a
// controller fails or alongside returns. Controllers built but not
// started (the term stopped first, or an InitFunc failed) are returned:
// each still gets its Run call.
func (h *Host) startTerm(termCtx context.Context, log logr.Logger, static Spec,
	env termEnv, r *runner, t *term, bg *sync.WaitGroup) (*alongsideRun, []built, error) {
	var later []built
	al, initErr := h.initAll(termCtx, log, static, env, r, &later)
	switch {
	case errors.Is(initErr, errStopping):
		log.Info("The term stopped before every controller was built; the rest are not built")
		return al, later, nil
	case initErr != nil:
		log.Error(initErr, "Stopping the term because a controller could not be built")
		return al, later, initErr
	}
	env.set.Start(termCtx.Done())
	close(env.started)
	log.V(1).Info("Informers started")
	for _, b := range later {
		r.start(b.s, b.c)
	}
	bg.Go(func() { t.units.watch(termCtx) })
	select {
	case <-termCtx.Done():
	case <-r.Failed():
		log.Info("Stopping the term because a controller failed")
	case <-al.returned():
		log.Info("Stopping the term because the alongside function returned")
	}
	return al, nil, nil
}

// settle leaves states ready for the next term once this one stopped, and
// fails those whose goroutines are stuck: still running after the stop
// deadline (limit, as the deadline says it). The error, unless nil, wraps
// leader.ErrTermStillRunning, which keeps the lease from being released
// while they may still act.
func settle(log logr.Logger, states []*State, stuck []string, limit string) error {
	for _, s := range states {
		s.setController(nil)
		s.takeInformers()
		if st, _ := s.Snapshot(); st.Phase == PhaseUnserved {
			s.set(PhaseWaiting, nil) // the next term asks discovery again
		}
	}
	var stuckErr error
	if len(stuck) > 0 {
		stuckErr = fmt.Errorf("%w: still running after %s: %v (%w)", ErrShutdownTimeout, limit,
			stuck, leader.ErrTermStillRunning)
		log.Error(stuckErr, "Abandoning controllers")
		for _, st := range states {
			if slices.ContainsFunc(stuck, func(name string) bool {
				return ofController(name, st.Desc.Name())
			}) {
				st.fail(fmt.Errorf("controller %q: %w", st.Desc.Name(), stuckErr))
			}
		}
	} else {
		log.Info("All controllers stopped")
	}
	return stuckErr
}

type built struct {
	s *State
	c descriptor.Controller
}

// alongsideRun is a running alongside function.
type alongsideRun struct {
	done chan struct{} // closed when it returned
	err  error         // set before done closes; nil for a return on cancellation
}

// returned is done, or nil (never ready) without an alongside function.
func (a *alongsideRun) returned() <-chan struct{} {
	if a == nil {
		return nil
	}
	return a.done
}

// initAll calls the InitFuncs in order, StartFirst ones first (each
// controller's Run is called before the next InitFunc), then starts
// spec.Alongside, then the others, whose controllers are appended to later
// (or, on warm caches, started at once). It stops at the first failure,
// and returns errStopping without calling further InitFuncs once ctx is
// done.
func (h *Host) initAll(ctx context.Context, log logr.Logger, spec Spec, env termEnv,
	r *runner, later *[]built) (*alongsideRun, error) {
	var al *alongsideRun
	// What a warm set holds for a controller that chose not to start is
	// released once every InitFunc of the build returned: a controller
	// built after it that reads the same resource without declaring it
	// takes the warm informer over instead of listing anew.
	var declined []string
	defer func() {
		for _, name := range declined {
			spec.Warm.Release(name)
		}
	}()
	for _, first := range []bool{true, false} {
		for _, s := range spec.States {
			if s.Desc.IsStartFirst() != first {
				continue
			}
			if ctx.Err() != nil {
				return al, errStopping
			}
			view := env.set.For(s.Desc.Name())
			c, err := h.build(ctx, log, s, env, r, view)
			if err != nil {
				return al, err
			}
			switch {
			case c == nil:
				// Nothing of it runs in this term: what it requested is
				// released now, before the informers start (or while they
				// run, warm), and what a warm set holds for it once the
				// build is done.
				s.takeInformers()
				view.Shutdown()
				if spec.Warm != nil {
					declined = append(declined, s.Desc.Name())
				}
			case first:
				// Its Run is called, without the start interval's jitter,
				// before any other InitFunc.
				select {
				case <-r.startNow(s, c):
				case <-ctx.Done():
				}
			case spec.Warm != nil:
				// On warm caches nothing is gained by waiting for the
				// other InitFuncs: the declared informers run already.
				r.start(s, c)
			default:
				*later = append(*later, built{s, c})
			}
		}
		if first && spec.Alongside != nil {
			if ctx.Err() != nil {
				return al, errStopping
			}
			al = &alongsideRun{done: make(chan struct{})}
			go func() {
				defer close(al.done)
				if err := spec.Alongside(ctx); err != nil &&
					!(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
					al.err = err
				}
			}()
		}
	}
	return al, nil
}

// namesOf maps each controller of states to its aliases.
func namesOf(states []*State) map[string][]string {
	out := make(map[string][]string, len(states))
	for _, s := range states {
		out[s.Desc.Name()] = s.Desc.Aliases()
	}
	return out
}
