package manager

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/fence"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/internal/supervisor"
	"github.com/ctrlhost/ctrlhost/leader"
)

// restMapperResetPeriod is how often a term forgets discovery, as KCM does,
// so that API groups installed later are found.
const restMapperResetPeriod = 30 * time.Second

// term is one run of a group of controllers over one informer set.
type term struct {
	name string
	set  *informers.Set
}

// ErrControllerFailed is wrapped by the error Run returns when a controller's
// InitFunc or Run failed or panicked.
var ErrControllerFailed = errors.New("controller failed")

// ErrShutdownTimeout is wrapped by the error Run returns when controllers
// did not return within ControllerShutdownTimeout (or, after a lost lease,
// within the lock's stop budget).
var ErrShutdownTimeout = errors.New("controllers did not stop in time")

// termSpec says what one term runs.
type termSpec struct {
	name   string
	states []*state
	// alongside, if set, runs once the StartFirst controllers run and before
	// any other InitFunc is called, under the term's context; the term
	// waits for it like for a controller, and its error ends the term. The
	// main term runs the migration campaign this way.
	alongside func(ctx context.Context) error
	// warm, if set, is the informer set the term runs on (warm standby):
	// already started and usually synced. The term stops it when it ends.
	warm *informers.Warm
	// slot, if set, makes this a slot term of a shard group.
	slot *slotTerm
}

// termEnv is what the term hands every InitFunc of one term.
type termEnv struct {
	set     *informers.Set
	mapper  meta.ResettableRESTMapper
	gate    *fence.Gate   // nil: writes are not fenced
	started chan struct{} // InformersStarted
	slot    *slotTerm     // nil unless a slot term
}

// runTerm builds and runs spec's controllers until ctx is done or one of
// them fails, then stops them (bounded) and shuts the informers down.
//
// Order: StartFirst controllers are built and started; then alongside
// starts; then every other InitFunc runs; then the informers start and
// InformersStarted closes; then every other controller's Run starts in its
// own goroutine. On a warm set (warm standby) each controller's Run starts
// as soon as its InitFunc returned instead, before InformersStarted. A term that ends before its informers could start (an
// InitFunc failed) closes InformersStarted anyway, with the term's context
// already done, so that a controller waiting on it returns.
func (m *Manager) runTerm(ctx context.Context, spec termSpec) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("term", spec.name)
	termCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lease := leader.TermFrom(ctx) // nil without leader election

	env := termEnv{
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(m.client.Discovery())),
		started: make(chan struct{}),
		slot:    spec.slot,
	}
	if spec.warm != nil {
		env.set = spec.warm.Set()
	} else {
		client := kubernetes.Interface(m.client)
		if spec.slot != nil {
			client = spec.slot.client
		}
		env.set = informers.New(client, m.metaClient, informers.Options{Resync: m.resyncPeriod()})
	}
	if lease != nil {
		env.gate = lease.Gate()
	}
	t := &term{name: spec.name, set: env.set}
	m.addTerm(t)
	defer m.removeTerm(t)

	var bg sync.WaitGroup
	bg.Go(func() { wait.Until(env.mapper.Reset, restMapperResetPeriod, termCtx.Done()) })

	// Controllers stop after the alongside function returned (the migration
	// term ends before the main term's controllers are told to stop), so
	// their context is cancelled by the term, not by its parent.
	ctrlCtx, cancelCtrl := context.WithCancel(context.WithoutCancel(termCtx))
	defer cancelCtrl()
	r := newRunner(ctrlCtx, log, m)
	stop := stopDeadline(m.opts.ControllerShutdownTimeout, lease, log)
	log.Info("Starting controllers", "count", len(spec.states), "warmCaches", spec.warm != nil)

	var later []built
	alongside, initErr := m.initAll(termCtx, log, spec, env, r, stop, &later)
	if initErr == nil {
		env.set.Start(termCtx.Done())
		close(env.started)
		log.V(1).Info("Informers started")
		for _, b := range later {
			r.start(b.s, b.c)
		}
		select {
		case <-termCtx.Done():
		case <-r.Failed():
			log.Info("Stopping the term because a controller failed")
		}
		cancel(errors.New("term ended"))
		if alongside != nil && !stop.Wait(alongside, nil) {
			log.Info("Stopping controllers although the alongside function has not returned")
		}
		cancelCtrl()
	} else {
		log.Error(initErr, "Stopping the term because a controller could not be built")
		cancel(errors.New("term ended"))
		if alongside != nil {
			stop.Wait(alongside, nil)
		}
		cancelCtrl()
		close(env.started)
		// Every built controller gets its Run call, here with a done
		// context, so it can release what its InitFunc acquired.
		for _, b := range later {
			r.start(b.s, b.c)
		}
	}

	stuck := r.wait(stop)
	bg.Wait()
	if spec.warm != nil {
		spec.warm.Stop()
	} else {
		env.set.Shutdown()
	}
	for _, s := range spec.states {
		s.setController(nil)
	}
	var stuckErr error
	if len(stuck) > 0 {
		// Wrapping leader.ErrTermStillRunning keeps the lease from being
		// released while they may still act.
		stuckErr = fmt.Errorf("%w: still running after %s: %v (%w)", ErrShutdownTimeout, stop.Limit(), stuck, leader.ErrTermStillRunning)
		log.Error(stuckErr, "Abandoning controllers")
	} else {
		log.Info("All controllers stopped")
	}
	return errors.Join(initErr, r.Err(), stuckErr)
}

type built struct {
	s *state
	c descriptor.Controller
}

// initAll calls the InitFuncs in order, StartFirst ones first (their
// controllers start at once), then starts spec.alongside (its returned
// channel closes when it returned; nil when it did not start), then the
// others, whose controllers are appended to later. It stops at the first
// failure.
func (m *Manager) initAll(ctx context.Context, log logr.Logger, spec termSpec, env termEnv, r *runner, stop *supervisor.Deadline, later *[]built) (alongside <-chan struct{}, err error) {
	for _, first := range []bool{true, false} {
		for _, s := range spec.states {
			if s.desc.IsStartFirst() != first {
				continue
			}
			c, err := m.build(ctx, log, s, env, r, stop)
			if err != nil {
				return alongside, err
			}
			switch {
			case c == nil:
			case first || spec.warm != nil:
				// On warm caches nothing is gained by waiting for the
				// other InitFuncs: the declared informers run already.
				r.start(s, c)
			default:
				*later = append(*later, built{s, c})
			}
		}
		if first && spec.alongside != nil {
			alongside = r.alongside(ctx, spec.name+"-alongside", spec.alongside)
		}
	}
	return alongside, nil
}

// build calls one InitFunc on a goroutine the runner tracks, recovering a
// panic. It waits for the InitFunc while the term runs; once the term is
// stopping, only until the stop deadline, after which the InitFunc is
// abandoned (named among the stragglers) and the term goes on stopping. A
// controller that an abandoned InitFunc returns later still gets its Run
// call, with a done context.
func (m *Manager) build(ctx context.Context, log logr.Logger, s *state, env termEnv, r *runner, stop *supervisor.Deadline) (descriptor.Controller, error) {
	name := s.desc.Name()
	s.set(PhaseInitializing, nil)
	cc := descriptor.Context{
		Name:                            name,
		ClientBuilder:                   clientBuilder{m: m, gate: env.gate, limiters: env.slot.rateLimiters()},
		RootClientBuilder:               clientBuilder{m: m, gate: env.gate, root: true, limiters: env.slot.rateLimiters()},
		InformerFactory:                 env.set.Typed(),
		NamespacedInformerFactory:       env.set.TypedFor,
		MetadataInformerFactory:         env.set.Metadata(),
		ObjectOrMetadataInformerFactory: env.set.ObjectOrMetadata(),
		InformersStarted:                env.started,
		ResyncPeriod:                    m.resyncPeriod,
		FeatureGate:                     m.featureGate,
		RESTMapper:                      env.mapper,
		Shard:                           env.slot.scope(),
		EventRecorder: fence.Recorder(env.gate, name,
			m.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: s.desc.EventSource()}),
			func(err error) { log.V(2).Info("Dropped an event", "controller", name, "err", err.Error()) }),
	}
	call := &initCall{returned: make(chan struct{})}
	r.Go(name+" (InitFunc)", func() {
		var c descriptor.Controller
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = panicError(log, name, "InitFunc", v)
					m.metrics.Panicked(name)
				}
			}()
			c, err = s.desc.Init()(logr.NewContext(ctx, log.WithName(name)), cc)
		}()
		if !call.deliver(c, err) && c != nil {
			// Abandoned: the term is over; let it release what it holds.
			r.run(name, c)
		}
	})
	select {
	case <-call.returned:
	case <-ctx.Done():
		if !stop.Wait(call.returned, nil) && call.abandon() {
			err := fmt.Errorf("controller %q: %w: init: InitFunc still running when the term had to stop", name, ErrControllerFailed)
			s.fail(err)
			return nil, err
		}
	}
	res := call.res
	if res.err != nil {
		m.metrics.Failed(name)
		err := fmt.Errorf("controller %q: %w: init: %w", name, ErrControllerFailed, res.err)
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

func panicError(log logr.Logger, name, where string, v any) error {
	err := fmt.Errorf("%s panicked: %v", where, v)
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
