package term

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

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
func (h *Host) build(ctx context.Context, log logr.Logger, s *State, env termEnv, r *runner,
	view *informers.Set) (descriptor.Controller, error) {
	name := s.Desc.Name()
	s.set(PhaseInitializing, nil)
	cc := h.initContext(s, env, view)
	call := h.callInit(ctx, log, s, cc, r, view)
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
		h.Metrics.Failed(name)
		err := h.Failure(name, true, false, res.err)
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
func (h *Host) initContext(s *State, env termEnv, view *informers.Set) descriptor.Context {
	name := s.Desc.Name()
	cctx, stopClients := context.WithCancel(env.ctx)
	s.setClientsStop(stopClients)
	cb := clientBuilder{host: h.Clients, gate: env.gate, limiters: env.slot.rateLimiters(),
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
		Metrics:                         h.Registry,
		Queues:                          env.queues.For(name),
		InformersStarted:                env.started,
		ResyncPeriod:                    h.resyncPeriod,
		FeatureGate:                     h.FeatureGate,
		RESTMapper:                      env.mapper,
		Shard:                           env.slot.scope(),
		EventRecorder: env.events.recorder(cb, name, s.Desc.ClientName(),
			s.Desc.EventSource()),
	}
}

// callInit calls s's InitFunc in a goroutine of r, recovering a panic. An
// InitFunc the term gave up on (call.abandon) still has the controller it
// returns run, with a done context, and then releases view.
func (h *Host) callInit(ctx context.Context, log logr.Logger, s *State,
	cc descriptor.Context, r *runner, view *informers.Set) *initCall {
	name := s.Desc.Name()
	call := &initCall{returned: make(chan struct{})}
	r.Go(goroutineName(name, roleInit), func() {
		var c descriptor.Controller
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = h.Failure(name, true, true, panicValue(log, name, v))
					h.Metrics.Panicked(name)
				}
			}()
			c, err = s.Desc.Init()(logr.NewContext(ctx, log.WithName(name)), cc)
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
func (h *Host) resyncPeriod() time.Duration {
	return time.Duration(float64(h.MinResyncPeriod) * (1 + rand.Float64()))
}

// informerOptions are the options of a term's informer set, and of a warm
// one: a resync period, the dynamic client, what each controller declared
// it reads (descriptor.WithReads) and the informers it declared
// (WithInformers), shared copies of repeated strings, and the controllers
// of anticipate that are selected: those that will hold the set's
// informers once they started, after the informers did (a warm set's
// controllers, a term's WhenServed ones), which an informer made before
// it starts must cover.
func (h *Host) informerOptions(dyn dynamic.Interface, anticipate []*State) informers.Options {
	reads := map[string]informers.Fields{}
	requests := map[string][]schema.GroupVersionResource{}
	for name, s := range h.States {
		if r := s.Desc.Reads(); len(r) > 0 {
			reads[name] = r
		}
		if gvrs := s.Desc.Informers(); len(gvrs) > 0 {
			requests[name] = gvrs
		}
	}
	var names []string
	for _, s := range anticipate {
		if s.Enabled.Load() {
			names = append(names, s.Desc.Name())
		}
	}
	return informers.Options{Resync: h.resyncPeriod(), Dynamic: dyn, Reads: reads,
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
