package manager

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/fence"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/internal/queues"
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

// ErrControllerFailed is matched (errors.Is) by the error Run returns when a
// controller's InitFunc or Run failed or panicked: a *ControllerError.
var ErrControllerFailed = errors.New("controller failed")

// ControllerError is how a controller failed: its InitFunc or its Run
// returned an error or panicked. It reads once, `controller "x": InitFunc
// failed: <cause>` (or `Run panicked: <value>`); errors.Is matches
// ErrControllerFailed, and Unwrap gives the cause.
type ControllerError struct {
	Controller string // its canonical name
	Phase      string // "InitFunc" or "Run"
	Panicked   bool
	Err        error // what it returned, or the value it panicked with
}

func (e *ControllerError) Error() string {
	verb := "failed"
	if e.Panicked {
		verb = "panicked"
	}
	return fmt.Sprintf("controller %q: %s %s: %v", e.Controller, e.Phase, verb, e.Err)
}

// Unwrap returns the cause.
func (e *ControllerError) Unwrap() error { return e.Err }

// Is reports whether target is ErrControllerFailed.
func (e *ControllerError) Is(target error) bool { return target == ErrControllerFailed }

// phaseInit and phaseRun are ControllerError's phases.
const (
	phaseInit = "InitFunc"
	phaseRun  = "Run"
)

// ErrShutdownTimeout is wrapped by the error Run returns when controllers
// did not return within ControllerShutdownTimeout (or, after a lost lease,
// within the lock's stop budget).
var ErrShutdownTimeout = errors.New("controllers did not stop in time")

// termSpec says what one term runs.
type termSpec struct {
	name   string
	states []*state
	// alongside, if set, runs once the StartFirst controllers run and before
	// any other InitFunc is called, under the term's context, which ends
	// when the term's controllers are told to stop. The term always waits
	// for it to return before it returns itself (so its lease outlives
	// alongside's), and its return before the term ends (an error, or a
	// lost lease of its own) ends the term. The main term runs the
	// migration campaign this way.
	alongside func(ctx context.Context) error
	// warm, if set, is the informer set the term runs on (warm standby):
	// already started and usually synced. The term stops it when it ends.
	warm *informers.Warm
	// slot, if set, makes this a slot term of a shard group.
	slot *slotTerm
	// parent, if set, is the lease of the term this one runs inside (the
	// main term's, for the migration term): losing it cuts this term's stop
	// as losing its own does.
	parent *leader.Term
}

// termEnv is what the term hands every InitFunc of one term.
type termEnv struct {
	ctx     context.Context // the controllers' context: it ends when they are told to stop
	set     *informers.Set
	mapper  meta.ResettableRESTMapper
	gate    *fence.Gate   // nil: writes are not fenced
	started chan struct{} // InformersStarted
	slot    *slotTerm     // nil unless a slot term
	events  *termEvents
	queues  *queues.Term
}

// errStopping is initAll's answer when the term began stopping before
// every InitFunc was called: the rest are not called.
var errStopping = errors.New("the term is stopping")

// eventFlushTimeout bounds how long a stopping term waits for event writes
// in flight after its controllers returned, before it cancels them.
const eventFlushTimeout = time.Second

// runTerm builds and runs spec's controllers until ctx is done or one of
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
func (m *Manager) runTerm(ctx context.Context, spec termSpec) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("term", spec.name)
	termCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lease := leader.TermFrom(ctx) // nil without leader election

	// Controllers stop when the term tells them to, not when its parent
	// context ends: the migration term ends first.
	ctrlCtx, cancelCtrl := context.WithCancel(context.WithoutCancel(termCtx))
	defer cancelCtrl()
	env := m.newTermEnv(ctrlCtx, log, spec, lease)
	r := newRunner(ctrlCtx, log, m.opts.ControllerStartInterval, m.metrics)
	t := &term{name: spec.name, set: env.set, slot: spec.slot != nil}
	static := spec.static()
	leases := []*leader.Term{lease, spec.parent}
	t.units = m.newTermUnits(log, env, r, spec.warm, leases, spec.states, static.states)
	m.addTerm(t)
	defer m.removeTerm(t)

	var bg sync.WaitGroup
	bg.Go(func() { wait.Until(env.mapper.Reset, restMapperResetPeriod, termCtx.Done()) })

	stop := m.stopBudget().deadline(log, lease, spec.parent)
	log.Info("Starting controllers", "count", len(spec.states), "warmCaches", spec.warm != nil)

	al, later, initErr := m.startTerm(termCtx, log, static, env, r, t, &bg)
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
	if spec.warm != nil {
		spec.warm.Stop()
	} else {
		env.set.Shutdown()
	}
	stuckErr := settle(log, spec.states, stuck, stop.Limit())
	return errors.Join(initErr, r.Err(), alErr, stuckErr)
}

// newTermEnv makes what spec's term hands its InitFuncs: its informer set
// (the warm one, or a new one over the slot's clients in a slot term), its
// write gate (lease's; none without leader election), event recorders and
// queues.
func (m *Manager) newTermEnv(ctrlCtx context.Context, log logr.Logger, spec termSpec,
	lease *leader.Term) termEnv {
	env := termEnv{
		ctx: ctrlCtx,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(
			memory.NewMemCacheClient(m.client.Discovery())),
		started: make(chan struct{}),
		slot:    spec.slot,
	}
	if spec.warm != nil {
		env.set = spec.warm.Set()
	} else {
		client, dyn := kubernetes.Interface(m.client), m.dynClient
		if spec.slot != nil {
			client, dyn = spec.slot.client, spec.slot.dynamic
		}
		// The informers the term's first build requests are made before
		// they start, and widen to what each holder reads; a WhenServed
		// controller comes later, and is anticipated.
		var later []*state
		for _, s := range spec.states {
			if len(s.desc.Served()) > 0 {
				later = append(later, s)
			}
		}
		env.set = informers.New(client, m.metaClient, m.informerOptions(dyn, later))
	}
	if lease != nil {
		env.gate = lease.Gate()
	}
	env.events = &termEvents{host: m.client, log: log, gate: env.gate}
	env.queues = queues.New(namesOf(spec.states))
	return env
}

// static is the part of spec its term builds at start: the controllers
// selected now, WhenServed ones excepted. The term's units start and stop
// the others, and these, as the selection and discovery change.
func (spec termSpec) static() termSpec {
	static := spec
	static.states = nil
	for _, s := range spec.states {
		if s.enabled.Load() && len(s.desc.Served()) == 0 {
			static.states = append(static.states, s)
		}
	}
	return static
}

// startTerm builds static's controllers (initAll), starts the informers
// and every controller built, and waits until the term is told to stop, a
// controller fails or alongside returns. Controllers built but not
// started (the term stopped first, or an InitFunc failed) are returned:
// each still gets its Run call.
func (m *Manager) startTerm(termCtx context.Context, log logr.Logger, static termSpec,
	env termEnv, r *runner, t *term, bg *sync.WaitGroup) (*alongsideRun, []built, error) {
	var later []built
	al, initErr := m.initAll(termCtx, log, static, env, r, &later)
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
func settle(log logr.Logger, states []*state, stuck []string, limit string) error {
	for _, s := range states {
		s.setController(nil)
		s.takeInformers()
		if st, _ := s.snapshot(); st.Phase == PhaseUnserved {
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
				return ofController(name, st.desc.Name())
			}) {
				st.fail(fmt.Errorf("controller %q: %w", st.desc.Name(), stuckErr))
			}
		}
	} else {
		log.Info("All controllers stopped")
	}
	return stuckErr
}

type built struct {
	s *state
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
// spec.alongside, then the others, whose controllers are appended to later
// (or, on warm caches, started at once). It stops at the first failure,
// and returns errStopping without calling further InitFuncs once ctx is
// done.
func (m *Manager) initAll(ctx context.Context, log logr.Logger, spec termSpec, env termEnv,
	r *runner, later *[]built) (*alongsideRun, error) {
	var al *alongsideRun
	// What a warm set holds for a controller that chose not to start is
	// released once every InitFunc of the build returned: a controller
	// built after it that reads the same resource without declaring it
	// takes the warm informer over instead of listing anew.
	var declined []string
	defer func() {
		for _, name := range declined {
			spec.warm.Release(name)
		}
	}()
	for _, first := range []bool{true, false} {
		for _, s := range spec.states {
			if s.desc.IsStartFirst() != first {
				continue
			}
			if ctx.Err() != nil {
				return al, errStopping
			}
			view := env.set.For(s.desc.Name())
			c, err := m.build(ctx, log, s, env, r, view)
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
				if spec.warm != nil {
					declined = append(declined, s.desc.Name())
				}
			case first:
				// Its Run is called, without the start interval's jitter,
				// before any other InitFunc.
				select {
				case <-r.startNow(s, c):
				case <-ctx.Done():
				}
			case spec.warm != nil:
				// On warm caches nothing is gained by waiting for the
				// other InitFuncs: the declared informers run already.
				r.start(s, c)
			default:
				*later = append(*later, built{s, c})
			}
		}
		if first && spec.alongside != nil {
			if ctx.Err() != nil {
				return al, errStopping
			}
			al = &alongsideRun{done: make(chan struct{})}
			go func() {
				defer close(al.done)
				if err := spec.alongside(ctx); err != nil &&
					!(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
					al.err = err
				}
			}()
		}
	}
	return al, nil
}

// build calls one InitFunc on a goroutine the runner tracks, recovering a
// panic. It waits for the InitFunc while the term runs; once the term is
// stopping, it gives the InitFunc up (errStopping: an error it returns then
// is no failure of the controller) and the term goes on stopping, while
// the runner still waits for the InitFunc's goroutine within the term's
// stop bound (naming it if it runs past it). A controller that an
// abandoned InitFunc returns later still gets its Run call, with a done
// context.
//
// The controller holds the term's informers through view (a holder of
// env.set its own), whose release on its stop removes its handlers and
// frees what no other controller holds; an abandoned InitFunc's late
// acquisitions are released once it and its Run returned.
func (m *Manager) build(ctx context.Context, log logr.Logger, s *state, env termEnv, r *runner,
	view *informers.Set) (descriptor.Controller, error) {
	name := s.desc.Name()
	s.set(PhaseInitializing, nil)
	cc := m.initContext(s, env, view)
	call := m.callInit(ctx, log, s, cc, r, view)
	select {
	case <-call.returned:
	case <-ctx.Done():
		if call.abandon() {
			// The term is stopping: it goes on at once, so that its other
			// controllers are told to stop without waiting for this
			// InitFunc; the runner waits for it within the term's stop
			// bound, and names it if it has not returned by then.
			s.set(PhaseStopped, nil)
			return nil, errStopping
		}
	}
	res := call.res
	if res.err != nil && ctx.Err() != nil {
		// It returned as the term began stopping, likely for that reason
		// (its informers stop with the term): given up, as one still
		// running would be.
		log.Info("InitFunc of a stopping term returned an error", "controller", name,
			"err", res.err.Error())
		s.set(PhaseStopped, nil)
		return nil, errStopping
	}
	if res.err != nil {
		m.metrics.Failed(name)
		err := res.err
		if ce := (*ControllerError)(nil); !errors.As(err, &ce) || ce.Controller != name {
			err = &ControllerError{name, phaseInit, false, err}
		}
		s.fail(err)
		return nil, err
	}
	if res.c == nil {
		log.Info("Controller chose not to start", "controller", name)
		s.set(PhaseNotStarted, nil)
		return nil, nil
	}
	s.setController(res.c)
	s.set(PhaseStarting, nil)
	return res.c, nil
}

// initContext is what s's InitFunc gets: clients fenced by the term's gate
// (their work on the host's behalf, minting the controller's token, ends
// with the term or when the controller is stopped alone), its own holder
// of the term's informers (view), its queues and event recorder.
func (m *Manager) initContext(s *state, env termEnv, view *informers.Set) descriptor.Context {
	name := s.desc.Name()
	cctx, stopClients := context.WithCancel(env.ctx)
	s.setClientsStop(stopClients)
	cb := clientBuilder{host: &m.hostClients, gate: env.gate, limiters: env.slot.rateLimiters(),
		ctx: cctx}
	root := cb
	root.root = true
	// The handlers it adds through its factories are recorded, so that
	// SetControllers can stop it alone and remove them from the informers
	// it shares with the term's other controllers.
	s.setInformers(view)
	return descriptor.Context{
		Name:                            name,
		ClientBuilder:                   cb,
		RootClientBuilder:               root,
		InformerFactory:                 view.Typed(),
		NamespacedInformerFactory:       view.TypedFor,
		MetadataInformerFactory:         view.Metadata(),
		ObjectOrMetadataInformerFactory: view.ObjectOrMetadata(),
		DynamicInformerFactory:          view.Dynamic(),
		Informers:                       view,
		Metrics:                         m.registry,
		Queues:                          env.queues.For(name),
		InformersStarted:                env.started,
		ResyncPeriod:                    m.resyncPeriod,
		FeatureGate:                     m.featureGate,
		RESTMapper:                      env.mapper,
		Shard:                           env.slot.scope(),
		EventRecorder: env.events.recorder(cb, name, s.desc.ClientName(),
			s.desc.EventSource()),
	}
}

// callInit calls s's InitFunc in a goroutine of r, recovering a panic. An
// InitFunc the term gave up on (call.abandon) still has the controller it
// returns run, with a done context, and then releases view.
func (m *Manager) callInit(ctx context.Context, log logr.Logger, s *state,
	cc descriptor.Context, r *runner, view *informers.Set) *initCall {
	name := s.desc.Name()
	call := &initCall{returned: make(chan struct{})}
	r.Go(goroutineName(name, roleInit), func() {
		var c descriptor.Controller
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = &ControllerError{name, phaseInit, true, panicValue(log, name, v)}
					m.metrics.Panicked(name)
				}
			}()
			c, err = s.desc.Init()(logr.NewContext(ctx, log.WithName(name)), cc)
		}()
		if !call.deliver(c, err) {
			// Abandoned: the term stopped while it ran.
			if err != nil {
				log.Info("InitFunc of a stopping term returned an error", "controller", name,
					"err", err.Error())
			}
			if c != nil {
				// Let it release what it holds.
				r.run(r.ctx, name, c)
			}
			// And release what it took from the term's informers after
			// its unit (if it was one) released the rest.
			view.Shutdown()
		}
	})
	return call
}

// initCall hands an InitFunc's result from its goroutine to the term, or
// back to the goroutine when the term gave up waiting: exactly one side
// handles it.
type initCall struct {
	returned chan struct{} // closed once res is set
	mu       sync.Mutex
	res      struct {
		c   descriptor.Controller
		err error
	}
	delivered, abandoned bool
}

// deliver stores the result for the term; false when the term abandoned the
// call, in which case the caller handles the result.
func (c *initCall) deliver(ctrl descriptor.Controller, err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.abandoned {
		return false
	}
	c.res.c, c.res.err, c.delivered = ctrl, err, true
	close(c.returned)
	return true
}

// abandon gives the result up unless it was delivered meanwhile; it reports
// whether the call is now abandoned.
func (c *initCall) abandon() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.delivered {
		c.abandoned = true
	}
	return c.abandoned
}

// resyncPeriod is KCM's: a random period in [min, 2·min).
func (m *Manager) resyncPeriod() time.Duration {
	return time.Duration(float64(m.opts.MinResyncPeriod) * (1 + rand.Float64()))
}

// informerOptions are the options of a term's informer set, and of a warm
// one: a resync period, the dynamic client, what each controller declared
// it reads (descriptor.WithReads) and the informers it declared
// (WithInformers), shared copies of repeated strings, and the controllers
// of anticipate that are selected: those that will hold the set's
// informers once they started, after the informers did (a warm set's
// controllers, a term's WhenServed ones), which an informer made before
// it starts must cover.
func (m *Manager) informerOptions(dyn dynamic.Interface, anticipate []*state) informers.Options {
	reads := map[string]informers.Fields{}
	requests := map[string][]schema.GroupVersionResource{}
	for name, s := range m.states {
		if r := s.desc.Reads(); len(r) > 0 {
			reads[name] = r
		}
		if gvrs := s.desc.Informers(); len(gvrs) > 0 {
			requests[name] = gvrs
		}
	}
	var names []string
	for _, s := range anticipate {
		if s.enabled.Load() {
			names = append(names, s.desc.Name())
		}
	}
	return informers.Options{Resync: m.resyncPeriod(), Dynamic: dyn, Reads: reads,
		Informers: requests, Anticipate: names, InternStrings: true}
}

// panicValue logs a recovered panic of controller name with its stack,
// and returns its value as an error.
func panicValue(log logr.Logger, name string, v any) error {
	err, ok := v.(error)
	if !ok {
		err = fmt.Errorf("%v", v)
	}
	log.Error(err, "Recovered from a panic", "controller", name, "stack", string(debug.Stack()))
	return err
}

func (m *Manager) addTerm(t *term) {
	m.termsMu.Lock()
	defer m.termsMu.Unlock()
	m.terms[t] = struct{}{}
}

func (m *Manager) removeTerm(t *term) {
	m.termsMu.Lock()
	defer m.termsMu.Unlock()
	delete(m.terms, t)
}

// runningTerms returns the terms running now.
func (m *Manager) runningTerms() []*term {
	m.termsMu.Lock()
	defer m.termsMu.Unlock()
	out := make([]*term, 0, len(m.terms))
	for t := range m.terms {
		out = append(out, t)
	}
	return out
}

// namesOf maps each controller of states to its aliases.
func namesOf(states []*state) map[string][]string {
	out := make(map[string][]string, len(states))
	for _, s := range states {
		out[s.desc.Name()] = s.desc.Aliases()
	}
	return out
}
