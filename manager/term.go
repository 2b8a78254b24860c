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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/metrics"
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
// did not return within ControllerShutdownTimeout.
var ErrShutdownTimeout = errors.New("controllers did not stop in time")

// runTerm builds and runs states' controllers until ctx is done or one of
// them fails, then stops them (bounded) and shuts the informers down.
//
// Order: StartFirst controllers are built and started; then every other
// InitFunc runs; then the informers start and InformersStarted closes; then
// every other controller's Run starts in its own goroutine.
func (m *Manager) runTerm(ctx context.Context, spec termSpec) error {
	name, states := spec.name, spec.states
	log := logr.FromContextOrDiscard(ctx).WithValues("term", name)
	termCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	set := informers.New(m.client, m.metaClient, informers.Options{Resync: m.resyncPeriod()})
	t := &term{name: name, set: set}
	m.addTerm(t)
	defer m.removeTerm(t)

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(m.client.Discovery()))
	var bg sync.WaitGroup
	bg.Go(func() { wait.Until(mapper.Reset, restMapperResetPeriod, termCtx.Done()) })

	r := &runner{ctx: termCtx, log: log, interval: m.opts.ControllerStartInterval, failed: make(chan struct{}, len(states)), metrics: m.metrics}
	log.Info("Starting controllers", "count", len(states))

	var initErr error
	type built struct {
		s *state
		c descriptor.Controller
	}
	var later []built
	// StartFirst controllers run before any other InitFunc is called.
	for _, first := range []bool{true, false} {
		for _, s := range states {
			if initErr != nil || s.desc.IsStartFirst() != first {
				continue
			}
			c, err := m.build(termCtx, log, s, set, mapper)
			if err != nil {
				initErr = err
				break
			}
			switch {
			case c == nil:
			case first:
				r.start(s, c)
			default:
				later = append(later, built{s, c})
			}
		}
		if first && initErr == nil && spec.afterStartFirst != nil {
			spec.afterStartFirst()
		}
	}

	if initErr == nil {
		set.Start(termCtx.Done())
		log.V(1).Info("Informers started")
		for _, b := range later {
			r.start(b.s, b.c)
		}
		select {
		case <-termCtx.Done():
		case <-r.failed:
			log.Info("Stopping the term because a controller failed")
		}
		cancel(errors.New("term ended"))
	} else {
		log.Error(initErr, "Stopping the term because a controller could not be built")
		cancel(errors.New("term ended"))
		// Every built controller gets its Run call, here with a done
		// context, so it can release what its InitFunc acquired.
		for _, b := range later {
			r.start(b.s, b.c)
		}
	}

	timeout := m.opts.ControllerShutdownTimeout
	if spec.stopTimeout != nil {
		timeout = spec.stopTimeout(ctx)
	}
	stuck := r.wait(timeout)
	bg.Wait()
	set.Shutdown()
	for _, s := range states {
		s.setController(nil)
	}
	var stuckErr error
	if len(stuck) > 0 {
		stuckErr = fmt.Errorf("%w within %v: %v", ErrShutdownTimeout, timeout, stuck)
		log.Error(stuckErr, "Abandoning controllers")
	} else {
		log.Info("All controllers stopped")
	}
	return errors.Join(initErr, r.err(), stuckErr)
}

// build calls one InitFunc, recovering a panic.
func (m *Manager) build(ctx context.Context, log logr.Logger, s *state, set *informers.Set, mapper meta.ResettableRESTMapper) (c descriptor.Controller, err error) {
	name := s.desc.Name()
	s.set(PhaseInitializing, nil)
	cc := descriptor.Context{
		Name:                            name,
		ClientBuilder:                   clientBuilder{m},
		InformerFactory:                 set.Typed(),
		MetadataInformerFactory:         set.Metadata(),
		ObjectOrMetadataInformerFactory: set.ObjectOrMetadata(),
		InformersStarted:                set.Started(),
		ResyncPeriod:                    m.resyncPeriod,
		FeatureGate:                     m.featureGate,
		RESTMapper:                      mapper,
		EventRecorder:                   m.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: name}),
	}
	func() {
		defer func() {
			if v := recover(); v != nil {
				err = panicError(log, name, "InitFunc", v)
				m.metrics.Panicked(name)
			}
		}()
		c, err = s.desc.Init()(logr.NewContext(ctx, log.WithName(name)), cc)
	}()
	if err != nil {
		m.metrics.Failed(name)
		err = fmt.Errorf("controller %q: %w: init: %w", name, ErrControllerFailed, err)
		s.fail(err)
		return nil, err
	}
	if c == nil {
		log.Info("Controller chose not to start", "controller", name)
		s.set(PhaseNotStarted, nil)
		return nil, nil
	}
	s.setController(c)
	s.set(PhaseStarting, nil)
	return c, nil
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

// termSpec says what one term runs.
type termSpec struct {
	name   string
	states []*state
	// afterStartFirst, if set, is called once the StartFirst controllers
	// run and before any other InitFunc is called.
	afterStartFirst func()
	// stopTimeout, if set, bounds the stop given the context the term ran
	// under; default ControllerShutdownTimeout.
	stopTimeout func(ctx context.Context) time.Duration
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

// runner owns the Run goroutines of one term.
type runner struct {
	ctx      context.Context
	log      logr.Logger
	interval time.Duration
	failed   chan struct{} // one send per failed controller; sized so no sender blocks
	metrics  *metrics.Controllers

	wg      sync.WaitGroup
	mu      sync.Mutex
	running []string
	errs    []error
}

func (r *runner) start(s *state, c descriptor.Controller) {
	name := s.desc.Name()
	r.mu.Lock()
	r.running = append(r.running, name)
	r.mu.Unlock()
	r.wg.Go(func() {
		defer r.finished(name)
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
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
			r.failed <- struct{}{}
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

func (r *runner) run(name string, c descriptor.Controller) (err error, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			err, panicked = panicError(r.log, name, "Run", v), true
		}
	}()
	return c.Run(logr.NewContext(r.ctx, r.log.WithName(name))), false
}

func (r *runner) finished(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i := slices.Index(r.running, name); i >= 0 {
		r.running = slices.Delete(r.running, i, i+1)
	}
}

// wait waits up to timeout for every Run to return, logging the laggards
// every timeout/3, and returns the names of those still running.
func (r *runner) wait(timeout time.Duration) []string {
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(max(timeout/3, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-tick.C:
			r.log.Info("Still waiting for controllers to stop", "running", r.stillRunning())
		case <-deadline.C:
			return r.stillRunning()
		}
	}
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
