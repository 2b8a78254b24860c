package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/leader"
)

// servedPollPeriod is how often a term that runs WhenServed controllers
// asks discovery whether their resources are served: one small request per
// group version they name, whatever the number of controllers, and only
// from the replica whose term runs them.
const servedPollPeriod = time.Second

// servedUnits runs the WhenServed controllers of one term (see
// descriptor.Descriptor.WhenServed): each as a unit of its own, built and
// started when discovery serves all its resources and stopped when one goes,
// over an informer set of its own that stops with it. A unit's goroutine
// runs on the term's runner, so the term's stop waits for it (and names it
// if it does not return); a unit's controller that fails fails the term, as
// any controller does.
type servedUnits struct {
	m      *Manager
	log    logr.Logger
	env    termEnv // the term's: its ctx ends when the controllers are told to stop
	r      *runner // the term's
	disc   discovery.DiscoveryInterface
	newSet func() *informers.Set
	leases []*leader.Term // the term's lease and its parent's: a lost one cuts a unit's stop
	states []*state

	mu      sync.Mutex
	closed  bool // the term is stopping: no unit starts
	running map[*state]*unit
	// served is the last answer of discovery per group version: the
	// resources it serves (none after a 404). A group version with no
	// answer yet, or whose last request failed otherwise, keeps its
	// previous answer: a flaky discovery request stops nothing.
	served map[schema.GroupVersion]map[string]bool
}

// unit is one start of a WhenServed controller.
type unit struct {
	cancel context.CancelFunc
	set    *informers.Set
	done   chan struct{} // closed once it stopped and its informers are shut down
	// unserved, set (under servedUnits.mu) when discovery stopped it, is
	// the phase's reason once it has stopped.
	unserved string
}

func (m *Manager) newServedUnits(log logr.Logger, env termEnv, r *runner, newSet func() *informers.Set,
	leases []*leader.Term, states []*state) *servedUnits {
	return &servedUnits{m: m, log: log, env: env, r: r, disc: m.client.Discovery(), newSet: newSet,
		leases: leases, states: states, running: map[*state]*unit{},
		served: map[schema.GroupVersion]map[string]bool{}}
}

// watch polls discovery and starts and stops the units until ctx ends.
func (u *servedUnits) watch(ctx context.Context) {
	var gvs []schema.GroupVersion
	for _, s := range u.states {
		for _, gvr := range s.desc.Served() {
			if gv := gvr.GroupVersion(); !slices.Contains(gvs, gv) {
				gvs = append(gvs, gv)
			}
		}
	}
	kick := make(chan struct{}, 1)
	var watches sync.WaitGroup
	defer watches.Wait()
	u.watchDefinitions(ctx, &watches, kick)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
			t.Stop()
		}
		for _, gv := range gvs {
			u.poll(ctx, gv)
		}
		u.reconcile(ctx)
		t.Reset(servedPollPeriod)
	}
}

// definitionResources are what makes a resource served: a change to one
// is a reason to ask discovery again at once, not at the next poll.
var definitionResources = []schema.GroupVersionResource{
	{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"},
}

// watchDefinitions watches CustomResourceDefinitions and APIServices
// (metadata only) until ctx ends and sends on kick whenever one changes,
// so that a controller starts moments after its CRD is established rather
// than at the next poll. It is best effort: without the RBAC to list one
// of them (a single request tells), the units rely on polling alone.
func (u *servedUnits) watchDefinitions(ctx context.Context, wg *sync.WaitGroup, kick chan struct{}) {
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	for _, gvr := range definitionResources {
		if _, err := u.m.metaClient.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			u.log.V(1).Info("Not watching; WhenServed controllers rely on polling discovery",
				"resource", gvr.String(), "err", err.Error())
			continue
		}
		inf := metadatainformer.NewFilteredMetadataInformer(u.m.metaClient, gvr, "", 0, cache.Indexers{}, nil).Informer()
		_ = inf.SetTransform(informers.StripManagedFields)
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    poke,
			UpdateFunc: func(_, obj any) { poke(obj) },
			DeleteFunc: poke,
		}); err != nil {
			continue
		}
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
}

// poll asks discovery for gv's resources.
func (u *servedUnits) poll(ctx context.Context, gv schema.GroupVersion) {
	list, err := resourcesOf(ctx, u.disc, gv)
	served := map[string]bool{}
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		u.log.V(2).Info("Discovery failed; keeping the last answer", "groupVersion", gv.String(), "err", err.Error())
		return
	default:
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") {
				served[r.Name] = true
			}
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.served[gv] = served
}

// resourcesOf is discovery's ServerResourcesForGroupVersion bounded by
// ctx, so that a term stops without waiting for a request that hangs (a
// client-go discovery call takes no context). A discovery client without a
// REST client (a fake clientset's) is asked without one.
func resourcesOf(ctx context.Context, disc discovery.DiscoveryInterface,
	gv schema.GroupVersion) (*metav1.APIResourceList, error) {
	rc := disc.RESTClient()
	if rc == nil || reflect.ValueOf(rc).IsNil() {
		return disc.ServerResourcesForGroupVersion(gv.String())
	}
	path := "/apis/" + gv.String()
	if gv.Group == "" {
		path = "/api/" + gv.Version
	}
	body, err := rc.Get().AbsPath(path).SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	list := &metav1.APIResourceList{}
	if err := json.Unmarshal(body, list); err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", gv, err)
	}
	return list, nil
}

// missing lists s's resources discovery does not serve (or has not
// answered for yet).
func (u *servedUnits) missing(s *state) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, gvr := range s.desc.Served() {
		if !u.served[gvr.GroupVersion()][gvr.Resource] {
			out = append(out, gvr.String())
		}
	}
	return out
}

// reconcile starts every unit whose resources are served and stops every
// one whose resources are not.
func (u *servedUnits) reconcile(ctx context.Context) {
	for _, s := range u.states {
		missing := u.missing(s)
		u.mu.Lock()
		un := u.running[s]
		if un != nil {
			select {
			case <-un.done:
				// It stopped (its resources went, or it failed): a new
				// unit may start.
				delete(u.running, s)
				un = nil
			default:
			}
		}
		u.mu.Unlock()
		name := s.desc.Name()
		switch {
		case ctx.Err() != nil:
			return
		case len(missing) == 0 && un == nil:
			u.log.Info("Starting controller: the resources it waits for are served", "controller", name,
				"resources", s.desc.Served())
			u.start(s)
		case len(missing) > 0 && un != nil:
			u.log.Info("Stopping controller: a resource it needs is no longer served", "controller", name,
				"missing", missing)
			u.mu.Lock()
			un.unserved = "not served: " + strings.Join(missing, ", ")
			u.mu.Unlock()
			un.cancel()
		case len(missing) > 0:
			s.unserved("not served: " + strings.Join(missing, ", "))
		}
	}
}

// close keeps any unit from starting: the term is stopping, and its
// runner takes no new goroutine once it waits for them.
func (u *servedUnits) close() {
	if u == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
}

// start builds and runs s as a new unit, unless the term is stopping.
func (u *servedUnits) start(s *state) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return
	}
	uctx, cancel := context.WithCancel(u.env.ctx)
	un := &unit{cancel: cancel, set: u.newSet(), done: make(chan struct{})}
	u.running[s] = un
	name := s.desc.Name()
	u.r.Go(name+" (served)", func() {
		defer close(un.done)
		defer cancel()
		log := u.log.WithValues("controller", name)
		env := u.env
		env.ctx, env.set, env.started = uctx, un.set, make(chan struct{})
		env.events = &termEvents{m: u.m, log: u.log, gate: u.env.gate}
		ur := newRunner(uctx, u.log, u.m)
		c, err := u.m.build(uctx, u.log, s, env, ur)
		switch {
		case errors.Is(err, errStopping):
		case err != nil:
			u.r.Fail(err)
		case c != nil:
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
		stop := stopDeadline(u.m.opts.LeaderElection.Clock, u.m.opts.ControllerShutdownTimeout, log, u.leases...)
		if stuck := ur.wait(stop); len(stuck) > 0 {
			// It may still act: the term ends, and names this unit among
			// its stragglers while it waits for it.
			err := fmt.Errorf("controller %q: %w: still running after %s: %v", name, ErrShutdownTimeout,
				stop.Limit(), stuck)
			s.fail(err)
			u.r.Fail(err)
			<-ur.Idle()
		}
		flush, cancelFlush := context.WithTimeout(context.WithoutCancel(u.env.ctx), eventFlushTimeout)
		env.events.stop(flush)
		cancelFlush()
		un.set.Shutdown()
		s.setController(nil)
		u.env.queues.forget(name)
		// Forgotten at once, so that its caches can be freed.
		u.mu.Lock()
		if u.running[s] == un {
			delete(u.running, s)
		}
		reason := un.unserved
		u.mu.Unlock()
		if reason != "" {
			s.unserved(reason)
		}
		log.Info("Controller stopped; its informers are shut down")
	})
}

// sets returns the informer sets of the units running now.
func (u *servedUnits) sets() []*informers.Set {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]*informers.Set, 0, len(u.running))
	for _, un := range u.running {
		select {
		case <-un.done:
		default:
			out = append(out, un.set)
		}
	}
	return out
}
