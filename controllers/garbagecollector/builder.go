package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

type changeType int

const (
	added changeType = iota
	updated
	deleted
)

// change is one informer event (or a virtual delete the workers found) to
// fold into the graph.
type change struct {
	kind    changeType
	virtual bool
	gvk     schema.GroupVersionKind
	obj     metav1.Object
	old     metav1.Object
}

// monitor watches one resource for the graph.
type monitor struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
	started  bool
}

func (m *monitor) synced() bool { return m.informer.HasSynced() && m.reg.HasSynced() }

// handlers turns a resource's informer events into graph changes.
func (gc *collector) handlers(gvk schema.GroupVersionKind) cache.ResourceEventHandler {
	toMeta := func(obj any) metav1.Object {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil
		}
		return m
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if m := toMeta(obj); m != nil {
				gc.changes.Add(&change{kind: added, gvk: gvk, obj: m})
			}
		},
		UpdateFunc: func(old, obj any) {
			if m := toMeta(obj); m != nil {
				gc.changes.Add(&change{kind: updated, gvk: gvk, obj: m, old: toMeta(old)})
			}
		},
		DeleteFunc: func(obj any) {
			if m := toMeta(obj); m != nil {
				gc.changes.Add(&change{kind: deleted, gvk: gvk, obj: m})
			}
		},
	}
}

// syncMonitors makes the monitors match resources (less the ignored ones):
// new resources get a handler on their informer, gone ones lose it.
func (gc *collector) syncMonitors(
	log logr.Logger,
	resources map[schema.GroupVersionResource]struct{},
) error {
	gc.monMu.Lock()
	defer gc.monMu.Unlock()
	old := gc.monitors
	cur := map[schema.GroupVersionResource]*monitor{}
	var errs []error
	nAdded, kept := 0, 0
	for r := range resources {
		if _, ignored := gc.ignored[r.GroupResource()]; ignored {
			continue
		}
		if m, ok := old[r]; ok {
			cur[r] = m
			delete(old, r)
			kept++
			continue
		}
		kind, err := gc.mapper.KindFor(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("couldn't look up resource %q: %w", r, err))
			continue
		}
		inf, err := gc.factory.ForResource(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("couldn't start monitor for resource %q: %w", r, err))
			continue
		}
		// Not Loop.Watch: the monitors feed the dependency graph's builder (KCM's
		// graphChanges), not a queue of keys.
		reg, err := inf.Informer().AddEventHandler(gc.handlers(kind))
		if err != nil {
			errs = append(errs, fmt.Errorf("couldn't start monitor for resource %q: %w", r, err))
			continue
		}
		cur[r] = &monitor{informer: inf.Informer(), reg: reg}
		nAdded++
	}
	for _, m := range old {
		if err := m.informer.RemoveEventHandler(m.reg); err != nil {
			errs = append(errs, err)
		}
	}
	gc.monitors = cur
	log.V(4).Info("Synced monitors", "added", nAdded, "kept", kept, "removed", len(old))
	return errors.Join(errs...)
}

// startMonitors starts the informers of monitors not started yet, once the
// host has started its informers.
func (gc *collector) startMonitors(ctx context.Context) {
	select {
	case <-gc.informersStarted:
	case <-ctx.Done():
		return
	}
	gc.monMu.Lock()
	defer gc.monMu.Unlock()
	n := 0
	for _, m := range gc.monitors {
		if !m.started {
			m.started = true
			n++
		}
	}
	if n > 0 {
		gc.factory.Start(ctx.Done())
	}
	logr.FromContextOrDiscard(ctx).
		V(4).
		Info("Started new monitors", "new", n, "current", len(gc.monitors))
}

// graphSynced reports whether there are monitors and all have synced.
func (gc *collector) graphSynced() bool {
	gc.monMu.Lock()
	defer gc.monMu.Unlock()
	if len(gc.monitors) == 0 {
		return false
	}
	for _, m := range gc.monitors {
		if !m.synced() {
			return false
		}
	}
	return true
}

func (gc *collector) resourceSynced(r schema.GroupVersionResource) bool {
	gc.monMu.Lock()
	defer gc.monMu.Unlock()
	m, ok := gc.monitors[r]
	return ok && m.synced()
}

// cached returns the monitor's copy of an object, if any.
func (gc *collector) cached(r schema.GroupVersionResource, ns, name string) (metav1.Object, bool) {
	gc.monMu.Lock()
	m, ok := gc.monitors[r]
	gc.monMu.Unlock()
	if !ok {
		return nil, false
	}
	key := name
	if ns != "" {
		key = ns + "/" + name
	}
	obj, exists, err := m.informer.GetStore().GetByKey(key)
	if err != nil || !exists {
		return nil, false
	}
	a, err := meta.Accessor(obj)
	return a, err == nil
}

// runGraph folds changes into the graph until the queue shuts down.
func (gc *collector) runGraph(ctx context.Context) {
	log := logr.FromContextOrDiscard(ctx)
	for {
		c, quit := gc.changes.Get()
		if quit {
			return
		}
		gc.safeProcessChange(log, c)
		gc.changes.Done(c)
	}
}

// safeProcessChange is processChange, turning a panic into a logged error
// so that the graph keeps being built.
func (gc *collector) safeProcessChange(log logr.Logger, c *change) {
	defer func() {
		if v := recover(); v != nil {
			log.Error(
				fmt.Errorf("%v", v),
				"Recovered from a panic while updating the dependency graph",
				"stack",
				string(debug.Stack()),
			)
		}
	}()
	gc.processChange(log, c)
}

func identityOf(c *change) objectRef {
	return objectRef{
		APIVersion: c.gvk.GroupVersion().String(), Kind: c.gvk.Kind,
		Name: c.obj.GetName(), UID: c.obj.GetUID(), Namespace: c.obj.GetNamespace(),
	}
}

func (gc *collector) enqueueDelete(n *node) { gc.deleteQ.Add(string(n.identity().UID)) }

// virtualDelete tells the graph that the object ref names is gone.
func (gc *collector) virtualDelete(ref objectRef) {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	obj := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID},
	}
	gc.changes.Add(&change{kind: deleted, virtual: true, gvk: gv.WithKind(ref.Kind), obj: obj})
}

// processChange is KCM's processGraphChanges for one change.
func (gc *collector) processChange(log logr.Logger, c *change) {
	uid := c.obj.GetUID()
	existing, found := gc.graph.get(uid)
	if found && !c.virtual && !existing.observed() {
		// A virtual node is now seen for real: its dependents may have
		// guessed its identity wrong.
		seen := identityOf(c)
		if seen != existing.identity() {
			_, mismatched := partitionDependents(existing.dependentList(), seen)
			for _, dep := range mismatched {
				if seen.Namespace != "" && dep.identity().Namespace != seen.Namespace {
					log.V(2).
						Info("Item references an owner but does not match namespaces",
							"item", dep.identity(), "owner", seen)
					gc.reportInvalidNamespace(dep, seen.UID)
				}
				gc.enqueueDelete(dep)
			}
			log.V(2).
				Info("Replacing virtual item with observed item",
					"virtual", existing.identity(), "observed", seen)
			existing = existing.clone()
			existing.setIdentity(seen)
			gc.graph.put(existing)
		}
		existing.markObserved()
	}
	switch {
	case (c.kind == added || c.kind == updated) && !found:
		n := newNode(identityOf(c))
		n.owners = c.obj.GetOwnerReferences()
		n.beingDeleted = c.obj.GetDeletionTimestamp() != nil
		n.deletingDependents = n.beingDeleted &&
			hasFinalizer(c.obj, metav1.FinalizerDeleteDependents)
		gc.graph.put(n)
		gc.addToOwners(log, n, n.owners)
		gc.transitions(log, c.old, c.obj, n)
	case c.kind == added || c.kind == updated:
		add, remove, chg := diffRefs(existing.ownerRefs(), c.obj.GetOwnerReferences())
		if len(add)+len(remove)+len(chg) > 0 {
			gc.enqueueUnblocked(remove, chg)
			existing.setOwners(c.obj.GetOwnerReferences())
			gc.addToOwners(log, existing, add)
			gc.removeFromOwners(existing, remove)
		}
		if c.obj.GetDeletionTimestamp() != nil {
			existing.markBeingDeleted()
		}
		gc.transitions(log, c.old, c.obj, existing)
	case c.kind == deleted:
		if !found {
			return
		}
		gc.processDelete(c, existing)
	}
}

func (gc *collector) processDelete(c *change, existing *node) {
	remove := true
	if c.virtual {
		gone := identityOf(c)
		switch {
		case !existing.observed():
			matching, others := partitionDependents(existing.dependentList(), gone)
			if len(others) > 0 {
				// Some dependents name this uid with other coordinates:
				// keep the node for them, and let the ones that matched
				// the absent identity go.
				remove = false
				if len(matching) > 0 {
					gc.absent.Add(gone, nil)
					for _, d := range matching {
						gc.enqueueDelete(d)
					}
				}
				if existing.identity() == gone {
					if alt := alternateIdentity(others, gone); alt != nil {
						r := existing.clone()
						r.setIdentity(*alt)
						gc.graph.put(r)
						gc.deleteQ.AddRateLimited(string(alt.UID))
					}
				}
			}
		case existing.identity() != gone:
			// The real object lives under other coordinates: only the
			// dependents that named the absent ones are affected.
			remove = false
			matching, _ := partitionDependents(existing.dependentList(), gone)
			if len(matching) > 0 {
				gc.absent.Add(gone, nil)
				for _, d := range matching {
					gc.enqueueDelete(d)
				}
			}
		}
	}
	if !remove {
		return
	}
	gc.graph.remove(existing.identity().UID)
	gc.removeFromOwners(existing, existing.ownerRefs())
	deps := existing.dependentList()
	if len(deps) > 0 {
		gc.absent.Add(identityOf(c), nil)
	}
	for _, d := range deps {
		gc.enqueueDelete(d)
	}
	for _, o := range existing.ownerRefs() {
		if on, ok := gc.graph.get(o.UID); ok && on.isDeletingDependents() {
			gc.enqueueDelete(on)
		}
	}
}

// addToOwners links n under each owner, making virtual nodes for owners
// not seen yet, and queues n when one of its references looks invalid.
func (gc *collector) addToOwners(log logr.Logger, n *node, owners []metav1.OwnerReference) {
	id := n.identity()
	suspicious := false
	for _, o := range owners {
		on, ok := gc.graph.get(o.UID)
		if !ok {
			on = newNode(refFromOwner(o, id.Namespace))
			on.virtual = true
			log.V(5).Info("Add virtual item", "identity", on.identity())
			gc.graph.put(on)
		}
		on.addDependent(n)
		if !ok {
			gc.enqueueDelete(on)
			continue
		}
		if suspicious {
			continue
		}
		oid := on.identity()
		switch {
		case oid.Namespace != "" && oid.Namespace != id.Namespace:
			if on.observed() {
				log.V(2).
					Info("Item references an owner but does not match namespaces", "item", id, "owner", oid)
				gc.reportInvalidNamespace(n, o.UID)
			}
			suspicious = true
		case !sameCoordinates(o, oid):
			suspicious = true
		case oid.Namespace == "" && oid.Namespace != id.Namespace && !on.observed():
			suspicious = true
		}
	}
	if suspicious {
		gc.enqueueDelete(n)
	}
}

func (gc *collector) removeFromOwners(n *node, owners []metav1.OwnerReference) {
	for _, o := range owners {
		if on, ok := gc.graph.get(o.UID); ok {
			on.removeDependent(n)
		}
	}
}

// reportInvalidNamespace records KCM's OwnerRefInvalidNamespace warning on
// the dependent n for its reference to owner.
func (gc *collector) reportInvalidNamespace(n *node, owner types.UID) {
	id := n.identity()
	for _, o := range n.ownerRefs() {
		if o.UID != owner {
			continue
		}
		bad := refFromOwner(o, id.Namespace)
		gc.recorder.Eventf(&corev1.ObjectReference{
			Kind: id.Kind, APIVersion: id.APIVersion, Namespace: id.Namespace, Name: id.Name, UID: id.UID,
		}, corev1.EventTypeWarning, "OwnerRefInvalidNamespace",
			"ownerRef %s does not exist in namespace %q", bad, id.Namespace)
		return
	}
}

// enqueueUnblocked queues owners that a dependent stopped blocking.
func (gc *collector) enqueueUnblocked(
	removed []metav1.OwnerReference,
	changed [][2]metav1.OwnerReference,
) {
	for _, r := range removed {
		if blocking(r) {
			if on, ok := gc.graph.get(r.UID); ok {
				gc.enqueueDelete(on)
			}
		}
	}
	for _, c := range changed {
		if blocking(c[0]) && !blocking(c[1]) {
			if on, ok := gc.graph.get(c[1].UID); ok {
				gc.enqueueDelete(on)
			}
		}
	}
}

// transitions queues n for the orphan or delete workers when its deletion
// with the matching finalizer starts.
func (gc *collector) transitions(log logr.Logger, old, obj metav1.Object, n *node) {
	if startsDeletingWith(old, obj, metav1.FinalizerOrphanDependents) {
		log.V(5).Info("Add item to attemptToOrphan", "item", n.identity())
		gc.orphanQ.Add(string(n.identity().UID))
		return
	}
	if startsDeletingWith(old, obj, metav1.FinalizerDeleteDependents) {
		log.V(2).
			Info("Add item to attemptToDelete, because it's waiting for its dependents to be deleted",
				"item", n.identity())
		n.markDeletingDependents()
		for _, d := range n.dependentList() {
			gc.enqueueDelete(d)
		}
		gc.enqueueDelete(n)
	}
}

func startsDeletingWith(old, obj metav1.Object, finalizer string) bool {
	if obj.GetDeletionTimestamp() == nil || !hasFinalizer(obj, finalizer) {
		return false
	}
	if old == nil || reflect.ValueOf(old).IsNil() {
		return true
	}
	return old.GetDeletionTimestamp() == nil || !hasFinalizer(old, finalizer)
}

func hasFinalizer(o metav1.Object, f string) bool { return slices.Contains(o.GetFinalizers(), f) }

// diffRefs compares owner references by uid.
func diffRefs(
	old, cur []metav1.OwnerReference,
) (add, remove []metav1.OwnerReference, change [][2]metav1.OwnerReference) {
	byUID := map[types.UID]metav1.OwnerReference{}
	for _, o := range old {
		byUID[o.UID] = o
	}
	for _, c := range cur {
		o, ok := byUID[c.UID]
		if !ok {
			add = append(add, c)
			continue
		}
		if !reflect.DeepEqual(o, c) {
			change = append(change, [2]metav1.OwnerReference{o, c})
		}
		delete(byUID, c.UID)
	}
	for _, o := range old {
		if _, ok := byUID[o.UID]; ok {
			remove = append(remove, o)
		}
	}
	return add, remove, change
}

// partitionDependents splits deps into those whose reference to owner's
// uid matches its coordinates (and namespace) and those whose does not.
func partitionDependents(deps []*node, owner objectRef) (matching, others []*node) {
	for _, d := range deps {
		match, mismatch := false, false
		if owner.Namespace != "" && owner.Namespace != d.identity().Namespace {
			mismatch = true
		} else {
			for _, o := range d.ownerRefs() {
				if o.UID == owner.UID {
					if sameCoordinates(o, owner) {
						match = true
					} else {
						mismatch = true
					}
				}
			}
		}
		if match {
			matching = append(matching, d)
		}
		if mismatch {
			others = append(others, d)
		}
	}
	return matching, others
}

func refLess(a, b objectRef) bool {
	switch {
	case a.Kind != b.Kind:
		return a.Kind < b.Kind
	case a.APIVersion != b.APIVersion:
		return a.APIVersion < b.APIVersion
	case a.Namespace != b.Namespace:
		return a.Namespace < b.Namespace
	case a.Name != b.Name:
		return a.Name < b.Name
	}
	return a.UID < b.UID
}

// alternateIdentity picks, after gone was verified absent, the next
// identity some dependent gives the same uid: the least one after gone in
// refLess order, else the least one.
func alternateIdentity(deps []*node, gone objectRef) *objectRef {
	clusterScoped := gone.Namespace == ""
	seen := map[objectRef]bool{gone: true}
	var first, following *objectRef
	for _, d := range deps {
		dns := d.identity().Namespace
		for _, o := range d.ownerRefs() {
			if o.UID != gone.UID {
				continue
			}
			if sameCoordinates(o, gone) && (clusterScoped || gone.Namespace == dns) {
				continue
			}
			r := refFromOwner(o, dns)
			if clusterScoped && r.APIVersion == gone.APIVersion && r.Kind == gone.Kind {
				r.Namespace = ""
			}
			if seen[r] {
				continue
			}
			seen[r] = true
			if first == nil || refLess(r, *first) {
				first = &r
			}
			if refLess(gone, r) && (following == nil || refLess(r, *following)) {
				following = &r
			}
		}
	}
	if following != nil {
		return following
	}
	return first
}
