package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/apiresources"
	"github.com/ctrlhost/ctrlhost/informers"
)

// ignoredResources are never quota'd, whatever discovery says (KCM's
// list: reviews, bindings, component statuses and events).
var ignoredResources = map[schema.GroupResource]struct{}{
	{Resource: "bindings"}:                                                 {},
	{Resource: "componentstatuses"}:                                        {},
	{Group: "authentication.k8s.io", Resource: "tokenreviews"}:             {},
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:       {},
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:      {},
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}:  {},
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}: {},
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:   {},
	{Resource: "events"}:                         {},
	{Group: "events.k8s.io", Resource: "events"}: {},
}

// quotable discovers the namespaced resources that can be created, listed,
// watched and deleted. A partial discovery failure returns what was found
// with the error; finding nothing is an error.
func quotable(
	d discovery.ServerResourcesInterface,
) (map[schema.GroupVersionResource]struct{}, error) {
	found, err := apiresources.Preferred(
		d,
		apiresources.Namespaced,
		"create",
		"list",
		"watch",
		"delete",
	)
	if err != nil && len(found) == 0 {
		return nil, fmt.Errorf("failed to discover resources: %w", err)
	}
	return found, err
}

// realClock judges pods' grace periods in the update filter, as KCM's
// does.
var realClock = clock.RealClock{}

// monitor is the replenishment handler on one resource's informer.
type monitor struct {
	informer kinformers.GenericInformer
	reg      cache.ResourceEventHandlerRegistration
}

// monitors watches every quotable resource: deletes, and updates that
// change what an object is charged, enqueue the quotas of its namespace.
type monitors struct {
	factory  informers.ObjectOrMetadataFactory
	registry *registry
	// resync is the replenishment handlers' resync period (0: none).
	resync    time.Duration
	replenish func(gr schema.GroupResource, namespace string)

	mu      sync.Mutex
	current map[schema.GroupVersionResource]*monitor
	// stop is set once the informers may be started (after the term's
	// InformersStarted); monitors added later start at once.
	stop <-chan struct{}
}

// sync makes the monitored resources those of resources (less the ignored
// ones), adding an object-count evaluator for each resource that has none.
// Monitors of resources no longer offered are removed. The errors of
// resources that could not be monitored are returned joined; the others
// are monitored all the same.
func (m *monitors) sync(
	ctx context.Context,
	resources map[schema.GroupVersionResource]struct{},
) error {
	log := logr.FromContextOrDiscard(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.current
	next := map[schema.GroupVersionResource]*monitor{}
	var errs []error
	added := 0
	for gvr := range resources {
		if _, ok := ignoredResources[gvr.GroupResource()]; ok {
			continue
		}
		if mon, ok := old[gvr]; ok {
			next[gvr] = mon
			delete(old, gvr)
			continue
		}
		mon, err := m.watch(gvr)
		if err != nil {
			errs = append(errs, fmt.Errorf("couldn't start monitor for resource %q: %w", gvr, err))
			continue
		}
		if m.registry.addIfAbsent(newCountEvaluator(gvr.GroupResource(), m.lister(gvr), "")) {
			log.V(2).
				Info("QuotaMonitor created object count evaluator", "resource", gvr.GroupResource())
		}
		next[gvr] = mon
		added++
	}
	for gvr, mon := range old {
		if err := mon.informer.Informer().RemoveEventHandler(mon.reg); err != nil {
			errs = append(errs, fmt.Errorf("removing the monitor of %s: %w", gvr, err))
		}
	}
	log.V(4).
		Info("Quota monitors synced", "added", added, "kept", len(next)-added, "removed", len(old))
	m.current = next
	if m.stop != nil && added > 0 {
		m.factory.Start(m.stop)
	}
	return errors.Join(errs...)
}

// start starts the monitors' informers (and any added later) until stop.
func (m *monitors) start(stop <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stop = stop
	m.factory.Start(stop)
}

// synced reports whether every monitor's informer has synced; with no
// monitor at all it is not (as in KCM: discovery found nothing yet).
func (m *monitors) synced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.current) == 0 {
		return false
	}
	for _, mon := range m.current {
		if !mon.reg.HasSynced() {
			return false
		}
	}
	return true
}

// resources lists the monitored resources.
func (m *monitors) resources() map[schema.GroupVersionResource]struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[schema.GroupVersionResource]struct{}, len(m.current))
	for gvr := range maps.Keys(m.current) {
		out[gvr] = struct{}{}
	}
	return out
}

func (m *monitors) watch(gvr schema.GroupVersionResource) (*monitor, error) {
	inf, err := m.factory.ForResource(gvr)
	if err != nil {
		return nil, err
	}
	gr := gvr.GroupResource()
	handler := cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			if chargeChanged(gr, oldObj, newObj) {
				m.objectChanged(gr, newObj)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			m.objectChanged(gr, obj)
		},
	}
	// Not Loop.Watch: a monitor has no key of its own to queue; it tells the
	// quota controller which namespace changed, with KCM's resync period.
	reg, err := inf.Informer().AddEventHandlerWithResyncPeriod(handler, m.resync)
	if err != nil {
		return nil, err
	}
	return &monitor{informer: inf, reg: reg}, nil
}

func (m *monitors) objectChanged(gr schema.GroupResource, obj any) {
	a, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	m.replenish(gr, a.GetNamespace())
}

// lister lists a resource's objects of one namespace from its informer,
// failing until the informer has synced.
func (m *monitors) lister(gvr schema.GroupVersionResource) listFunc {
	return func(namespace string) ([]runtime.Object, error) {
		inf, err := m.factory.ForResource(gvr)
		if err != nil {
			return nil, err
		}
		if !inf.Informer().HasSynced() {
			return nil, fmt.Errorf("%v not yet synced", gvr)
		}
		return inf.Lister().ByNamespace(namespace).List(labels.Everything())
	}
}

// chargeChanged reports whether an update changes what the object is
// charged: for pods a change of their resources as the kubelet reports
// them, of Terminating, or their ceasing to count (terminal, or past the
// deletion grace period); for services a change of type that quota sees;
// claims are recharged on every update (KCM compares the allocated storage
// by pointer, which always differs).
func chargeChanged(gr schema.GroupResource, oldObj, newObj any) bool {
	switch gr {
	case podsResource:
		o, ok1 := oldObj.(*corev1.Pod)
		n, ok2 := newObj.(*corev1.Pod)
		if !ok1 || !ok2 {
			return false
		}
		return statusResourcesChanged(o, n) || podTerminating(o) != podTerminating(n) ||
			(podCounts(o, realClock) && !podCounts(n, realClock))
	case servicesResource:
		o, ok1 := oldObj.(*corev1.Service)
		n, ok2 := newObj.(*corev1.Service)
		return ok1 && ok2 && quotaServiceType(o) != quotaServiceType(n)
	case pvcsResource:
		_, ok1 := oldObj.(*corev1.PersistentVolumeClaim)
		_, ok2 := newObj.(*corev1.PersistentVolumeClaim)
		return ok1 && ok2
	}
	return false
}

// statusResourcesChanged: a container's reported resources changed (an
// in-place resize took effect).
func statusResourcesChanged(o, n *corev1.Pod) bool {
	for _, pair := range []struct{ old, new []corev1.ContainerStatus }{
		{o.Status.ContainerStatuses, n.Status.ContainerStatuses},
		{o.Status.InitContainerStatuses, n.Status.InitContainerStatuses},
	} {
		for _, os := range pair.old {
			for _, ns := range pair.new {
				if ns.Name == os.Name &&
					!apiequality.Semantic.DeepEqual(os.Resources, ns.Resources) {
					return true
				}
			}
		}
	}
	return false
}
