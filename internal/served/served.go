// Package served tells a controller host which of the resources its
// WhenServed controllers wait for (descriptor.Descriptor.WhenServed) the
// API server serves, as discovery answers.
//
// Guarantees: a View asks discovery one request per group version (not
// per controller or resource), bounded by the caller's context (client-go's
// discovery calls take none); a failed request (a timeout, a 500) keeps
// the previous answer, and only an answer that no longer lists a resource,
// or a 404 for its group version, makes it missing. WatchDefinitions is
// best effort: without RBAC to list CRDs or APIServices it watches
// nothing and says so at V(1).
//
// Discovery is asked every PollPeriod, or, while the View watches every
// definition and none changed for SettlePeriod, every WatchedPollPeriod
// (a Poller keeps the period).
//
// Non-guarantees: a resource served but missing from discovery (a
// misbehaving aggregated API) is missing; one that discovery lists more
// than SettlePeriod after its definition's last change may wait up to
// WatchedPollPeriod; a View holds no goroutine of its own (its owner
// polls it).
package served

import (
	"context"
	"encoding/json"
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
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/informers"
)

// How often a host asks discovery whether its WhenServed controllers'
// resources are served (one small request per group version they name,
// whatever the number of controllers): a Poller's periods.
const (
	// PollPeriod is the period while the View does not watch every
	// definition (WatchDefinitions), and for SettlePeriod after one
	// changed.
	PollPeriod = time.Second
	// WatchedPollPeriod is the period while the View watches every
	// definition and none changed for SettlePeriod. A resource comes and
	// goes with a change to its CustomResourceDefinition or APIService
	// (the API server keeps an APIService for each group version it
	// serves itself too), which is asked about at once; this poll only
	// catches what a watch might miss.
	WatchedPollPeriod = time.Minute
	// SettlePeriod is how long discovery is asked every PollPeriod after a
	// definition changed: the API server's discovery follows the change
	// (a CRD established, an aggregated API available) with a delay.
	SettlePeriod = 10 * time.Second
)

// View is what one owner (a term, a warm follower) knows of the resources
// its WhenServed controllers wait for: the last answer of discovery per
// group version. Its methods are safe for concurrent use.
type View struct {
	log  logr.Logger
	disc discovery.DiscoveryInterface
	meta metadata.Interface
	gvs  []schema.GroupVersion // every group version the controllers name

	mu sync.Mutex
	// served holds, per group version, the resources discovery serves
	// (none after a 404). A group version with no answer yet, or whose
	// last request failed otherwise, keeps its previous answer: a flaky
	// discovery request stops nothing.
	served map[schema.GroupVersion]map[string]bool
	// watched is set once WatchDefinitions watches every definition
	// resource; changed is when one of them last changed.
	watched bool
	changed time.Time
}

// New returns a View of the group versions of resources, which has asked
// nothing yet: every resource is missing until Refresh.
func New(log logr.Logger, disc discovery.DiscoveryInterface, meta metadata.Interface,
	resources []schema.GroupVersionResource) *View {
	v := &View{log: log, disc: disc, meta: meta,
		served: map[schema.GroupVersion]map[string]bool{}}
	for _, gvr := range resources {
		if gv := gvr.GroupVersion(); !slices.Contains(v.gvs, gv) {
			v.gvs = append(v.gvs, gv)
		}
	}
	return v
}

// Empty reports whether the View has no resource to ask about.
func (v *View) Empty() bool { return len(v.gvs) == 0 }

// Refresh asks discovery about every group version, one after the other,
// each request bounded by ctx.
func (v *View) Refresh(ctx context.Context) {
	for _, gv := range v.gvs {
		v.poll(ctx, gv)
	}
}

// Missing lists the resources of gvrs discovery does not serve (or has not
// answered for yet), as GroupVersionResource strings.
func (v *View) Missing(gvrs []schema.GroupVersionResource) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for _, gvr := range gvrs {
		if !v.served[gvr.GroupVersion()][gvr.Resource] {
			out = append(out, gvr.String())
		}
	}
	return out
}

// definitionResources are what makes a resource served: a change to one
// is a reason to ask discovery again at once, not at the next poll.
var definitionResources = []schema.GroupVersionResource{
	{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"},
}

// WatchDefinitions watches CustomResourceDefinitions and APIServices
// (metadata only) until ctx ends and sends on kick whenever one changes,
// so that a controller starts moments after its CRD is established rather
// than at the next poll. It is best effort: without the RBAC to list one
// of them (a single request tells), the owner relies on polling alone. The
// watches' goroutines are added to wg.
func (v *View) WatchDefinitions(ctx context.Context, wg *sync.WaitGroup, kick chan struct{}) {
	poke := func(any) {
		v.mu.Lock()
		v.changed = time.Now()
		v.mu.Unlock()
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	watched := 0
	defer func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.watched = watched == len(definitionResources)
	}()
	for _, gvr := range definitionResources {
		if _, err := v.meta.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			v.log.V(1).Info("Not watching; WhenServed controllers rely on polling discovery",
				"resource", gvr.String(), "err", err.Error())
			continue
		}
		inf := metadatainformer.NewFilteredMetadataInformer(v.meta, gvr, "", 0,
			cache.Indexers{}, nil).Informer()
		_ = inf.SetTransform(informers.StripManagedFields)
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    poke,
			UpdateFunc: func(_, obj any) { poke(obj) },
			DeleteFunc: poke,
		}); err != nil {
			continue
		}
		wg.Go(func() { inf.RunWithContext(ctx) })
		watched++
	}
}

// pollEvery is the period discovery should be asked at now: PollPeriod
// unless the View watches every definition and none changed in the last
// SettlePeriod, WatchedPollPeriod then.
func (v *View) pollEvery() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.watched || time.Since(v.changed) < SettlePeriod {
		return PollPeriod
	}
	return WatchedPollPeriod
}

// Poller ticks when the owner of a View should ask discovery again. Its
// period follows the View (PollPeriod, WatchedPollPeriod): the owner calls
// Adjust after each Refresh.
type Poller struct {
	v      *View
	t      *time.Ticker
	period time.Duration
}

// NewPoller returns a running Poller for v; Stop stops it. Call it after
// WatchDefinitions.
func (v *View) NewPoller() *Poller {
	p := &Poller{v: v, period: v.pollEvery()}
	p.t = time.NewTicker(p.period)
	return p
}

// C delivers the ticks.
func (p *Poller) C() <-chan time.Time { return p.t.C }

// Period is the period the Poller ticks at.
func (p *Poller) Period() time.Duration { return p.period }

// Adjust sets the period to what the View calls for now, restarting the
// ticker only when it changes.
func (p *Poller) Adjust() {
	if d := p.v.pollEvery(); d != p.period {
		p.period = d
		p.t.Reset(d)
	}
}

// Stop stops the ticker.
func (p *Poller) Stop() { p.t.Stop() }

// poll asks discovery for gv's resources.
func (v *View) poll(ctx context.Context, gv schema.GroupVersion) {
	list, err := ResourcesOf(ctx, v.disc, gv)
	served := map[string]bool{}
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		v.log.V(2).Info("Discovery failed; keeping the last answer", "groupVersion", gv.String(),
			"err", err.Error())
		return
	default:
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") {
				served[r.Name] = true
			}
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.served[gv] = served
}

// ResourcesOf is discovery's ServerResourcesForGroupVersion bounded by
// ctx, so that a caller stops without waiting for a request that hangs (a
// client-go discovery call takes no context). A discovery client without a
// REST client (a fake clientset's) is asked without one.
func ResourcesOf(ctx context.Context, disc discovery.DiscoveryInterface,
	gv schema.GroupVersion) (*metav1.APIResourceList, error) {
	if disc == nil || reflect.ValueOf(disc).IsNil() {
		return nil, fmt.Errorf("no discovery client to ask whether %s is served", gv)
	}
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
