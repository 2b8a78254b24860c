package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"

	"github.com/ctrlhost/ctrlhost/controllers/internal/apiresources"
	"github.com/ctrlhost/ctrlhost/controllers/internal/passes"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// absentCacheSize is how many verified-absent owners are remembered, as
// in KCM.
const absentCacheSize = 500

// keyQueue is the part of a work queue the graph uses.
type keyQueue interface {
	Add(key string)
	AddRateLimited(key string)
}

// deps are what the collector is built over.
type deps struct {
	metadata  metadata.Interface
	discovery discovery.ServerResourcesInterface
	// invalidate forgets cached discovery answers before each resync (nil:
	// nothing cached).
	invalidate       func()
	mapper           meta.ResettableRESTMapper
	factory          informers.ObjectOrMetadataFactory
	informersStarted <-chan struct{}
	recorder         record.EventRecorder
	metrics          prometheus.Registerer // of the loops' counters; nil: process-wide
	ignored          []schema.GroupResource
	workers          int
	syncPeriod       time.Duration
}

// collector is the garbage collector: the dependency graph, fed by one
// monitor per deletable resource, and the workers acting on it.
type collector struct {
	deps
	ignored map[schema.GroupResource]struct{}

	graph    *uidIndex
	changes  workqueue.TypedInterface[*change]
	toDelete *workloop.Loop
	toOrphan *workloop.Loop
	// deleteQ and orphanQ feed the loops; tests record what is queued.
	deleteQ keyQueue
	orphanQ keyQueue
	absent  *lru.Cache

	monMu    sync.Mutex
	monitors map[schema.GroupVersionResource]*monitor
}

func newCollector(name string, d deps) *collector {
	gc := &collector{
		deps:    d,
		ignored: map[schema.GroupResource]struct{}{},
		graph:   newUIDIndex(),
		changes: workqueue.NewTypedWithConfig(
			workqueue.TypedQueueConfig[*change]{Name: "garbage_collector_graph_changes"},
		),
		absent:   lru.New(absentCacheSize),
		monitors: map[schema.GroupVersionResource]*monitor{},
	}
	for _, r := range d.ignored {
		gc.ignored[r] = struct{}{}
	}
	gc.toDelete = workloop.New(name+"-attempt-to-delete", gc.attemptToDelete,
		workloop.Options{Metrics: d.metrics})
	gc.toOrphan = workloop.New(name+"-attempt-to-orphan", gc.attemptToOrphan,
		workloop.Options{Metrics: d.metrics})
	gc.deleteQ, gc.orphanQ = gc.toDelete, gc.toOrphan
	return gc
}

// DebuggingHandler serves /graph, the dependency graph as Graphviz DOT.
func (gc *collector) DebuggingHandler() http.Handler { return graphHandler{gc.graph} }

// Run builds the graph, waits (at most one sync period, as KCM) for it to
// sync and collects garbage until ctx is done; discovery is refreshed every
// sync period.
func (gc *collector) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	var wg sync.WaitGroup
	defer func() {
		gc.changes.ShutDown()
		gc.toDelete.ShutDown()
		gc.toOrphan.ShutDown()
		wg.Wait()
		log.Info("Shutting down controller", "controller", "garbagecollector")
	}()
	if ctx.Err() != nil {
		return nil
	}
	log.Info("Starting controller", "controller", "garbagecollector")
	wg.Go(func() { gc.runGraph(ctx) })
	wg.Go(func() { gc.refreshLoop(ctx) })

	waitCtx, cancel := context.WithTimeout(ctx, gc.syncPeriod)
	synced := waitUntil(waitCtx, gc.graphSynced)
	cancel()
	if ctx.Err() != nil {
		return nil
	}
	if synced {
		log.Info("Garbage collector: all resource monitors have synced")
	} else {
		log.Info("Garbage collector: not all resource monitors could be synced, proceeding anyways")
	}
	log.Info("Proceeding to collect garbage")
	var errMu sync.Mutex
	var errs []error
	for _, l := range []*workloop.Loop{gc.toDelete, gc.toOrphan} {
		wg.Go(func() {
			if err := l.RunWorkers(ctx, gc.workers); err != nil {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		})
	}
	<-ctx.Done()
	gc.changes.ShutDown()
	wg.Wait()
	return errors.Join(errs...)
}

// waitUntil polls cond every 100ms until it holds or ctx is done.
func waitUntil(ctx context.Context, cond func() bool) bool {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// refreshLoop is KCM's Sync: at once and then every sync period, the
// deletable resources are discovered and the monitors follow them.
func (gc *collector) refreshLoop(ctx context.Context) {
	var old map[schema.GroupVersionResource]struct{}
	passes.Every(ctx, clock.RealClock{}, gc.syncPeriod, func(ctx context.Context) {
		old = gc.safeRefresh(ctx, old)
	})
}

// safeRefresh is refresh, turning a panic (say, in a discovery client)
// into a logged error: the round is retried next period.
func (gc *collector) safeRefresh(
	ctx context.Context,
	old map[schema.GroupVersionResource]struct{},
) (res map[schema.GroupVersionResource]struct{}) {
	defer func() {
		if v := recover(); v != nil {
			logr.FromContextOrDiscard(ctx).
				Error(fmt.Errorf("%v", v),
					"Recovered from a panic while syncing the garbage collector with discovery",
					"stack", string(debug.Stack()))
			res = old
		}
	}()
	return gc.refresh(ctx, old)
}

// refresh is one round of refreshLoop; it returns the resources now
// monitored.
func (gc *collector) refresh(
	ctx context.Context,
	old map[schema.GroupVersionResource]struct{},
) map[schema.GroupVersionResource]struct{} {
	log := logr.FromContextOrDiscard(ctx)
	if gc.invalidate != nil {
		gc.invalidate()
	}
	found, err := apiresources.Preferred(gc.discovery, apiresources.All, "delete", "list", "watch")
	if err != nil {
		log.Info("Failed to discover some resources", "err", err.Error())
	}
	if len(found) == 0 {
		log.V(2).Info("No resources reported by discovery, skipping garbage collector sync")
		return old
	}
	// Keep the synced monitors of groups discovery failed for this time.
	if failed, ok := discovery.GroupDiscoveryFailedErrorGroups(err); ok {
		for r := range old {
			if _, bad := failed[r.GroupVersion()]; bad && gc.resourceSynced(r) {
				found[r] = struct{}{}
			}
		}
	}
	if maps.Equal(old, found) {
		return old
	}
	log.V(2).
		Info("Syncing garbage collector with updated resources from discovery", "before", len(old),
			"after", len(found))
	gc.mapper.Reset()
	if err := gc.syncMonitors(log, found); err != nil {
		log.Error(err, "Failed to sync all resource monitors")
	}
	gc.startMonitors(ctx)
	waitCtx, cancel := context.WithTimeout(ctx, gc.syncPeriod)
	defer cancel()
	if waitUntil(waitCtx, gc.graphSynced) {
		log.V(2).Info("Synced garbage collector")
	} else if ctx.Err() == nil {
		log.Info("Timed out waiting for dependency graph builder sync during GC sync")
	}
	return found
}

var (
	errVirtualDeleteQueued     = errors.New("enqueued virtual delete event")
	errNamespacedOwnerOfGlobal = errors.New(
		"cluster-scoped objects cannot refer to namespaced owners",
	)
)

// mappingError: an owner reference's apiVersion/kind has no resource.
type mappingError struct{ kind, version string }

func (e *mappingError) Error() string {
	return fmt.Sprintf("unable to get REST mapping for %s/%s.", e.version, e.kind)
}

// attemptToDelete is the attempt-to-delete worker's sync: key is a uid.
func (gc *collector) attemptToDelete(ctx context.Context, key string) error {
	n, ok := gc.graph.get(types.UID(key))
	if !ok {
		return nil
	}
	err := gc.attemptToDeleteItem(ctx, n)
	switch {
	case errors.Is(err, errVirtualDeleteQueued), errors.Is(err, errNamespacedOwnerOfGlobal):
		return nil
	case err != nil:
		return fmt.Errorf("error syncing item %s: %w", n.identity(), err)
	case !n.observed():
		// Verified to exist: retry until the informer shows it.
		return fmt.Errorf("item %s hasn't been observed via informer yet", n.identity())
	}
	return nil
}

func (gc *collector) attemptToDeleteItem(ctx context.Context, n *node) error {
	log := logr.FromContextOrDiscard(ctx)
	id := n.identity()
	log.V(2).Info("Processing item", "item", id, "virtual", !n.observed())
	if n.isBeingDeleted() && !n.isDeletingDependents() {
		return nil
	}
	latest, err := gc.getObject(ctx, id)
	switch {
	case apierrors.IsNotFound(err):
		gc.virtualDelete(id)
		return errVirtualDeleteQueued
	case err != nil:
		return err
	}
	if latest.GetUID() != id.UID {
		gc.virtualDelete(id)
		return errVirtualDeleteQueued
	}
	if n.isDeletingDependents() {
		return gc.processDeletingDependents(ctx, n)
	}
	refs := latest.GetOwnerReferences()
	if len(refs) == 0 {
		log.V(2).Info("Item doesn't have an owner, continue on next item", "item", id)
		return nil
	}
	solid, dangling, waiting, err := gc.classify(ctx, id, refs)
	if err != nil {
		return err
	}
	switch {
	case len(solid) != 0:
		if len(dangling) == 0 && len(waiting) == 0 {
			return nil
		}
		log.V(2).
			Info("Remove dangling references and waiting references for item", "item", id,
				"dangling", len(dangling), "waiting", len(waiting))
		uids := append(uidsOf(dangling), uidsOf(waiting)...)
		return gc.removeOwnerRefs(ctx, n, uids)
	case len(waiting) != 0 && n.dependentCount() != 0:
		for _, d := range n.dependentList() {
			if d.isDeletingDependents() {
				// Both this item and one of its dependents wait for
				// dependents: unblock this item's references to avoid a
				// cycle, then delete it in the foreground.
				log.V(2).
					Info("Unblocking owner references of item to prevent a deletion cycle", "item", id,
						"dependent", d.identity())
				if err := gc.unblockOwnerRefs(ctx, n); err != nil {
					return err
				}
				break
			}
		}
		log.V(2).
			Info("At least one owner of item is deleting its dependents and the item has dependents: "+
				"deleting it in the foreground", "item", id)
		return gc.deleteItem(ctx, id, latest, metav1.DeletePropagationForeground)
	default:
		policy := metav1.DeletePropagationBackground
		switch {
		case hasFinalizer(latest, metav1.FinalizerOrphanDependents):
			policy = metav1.DeletePropagationOrphan
		case hasFinalizer(latest, metav1.FinalizerDeleteDependents):
			policy = metav1.DeletePropagationForeground
		}
		log.V(2).Info("Deleting item", "item", id, "propagationPolicy", policy)
		return gc.deleteItem(ctx, id, latest, policy)
	}
}

func (gc *collector) deleteItem(
	ctx context.Context,
	id objectRef,
	latest *metav1.PartialObjectMetadata,
	policy metav1.DeletionPropagation,
) error {
	err := gc.deleteObject(ctx, id, latest.ResourceVersion, latest.OwnerReferences, policy)
	if apierrors.IsNotFound(err) {
		gc.virtualDelete(id)
		return errVirtualDeleteQueued
	}
	return err
}

func uidsOf(refs []metav1.OwnerReference) []types.UID {
	out := make([]types.UID, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.UID)
	}
	return out
}

// classify sorts an item's references into owners that exist, owners that
// are absent and owners being deleted in the foreground.
func (gc *collector) classify(
	ctx context.Context,
	item objectRef,
	refs []metav1.OwnerReference,
) (solid, dangling, waiting []metav1.OwnerReference, err error) {
	for _, r := range refs {
		gone, owner, err := gc.dangling(ctx, r, item)
		if err != nil {
			return nil, nil, nil, err
		}
		switch {
		case gone:
			dangling = append(dangling, r)
		case owner.GetDeletionTimestamp() != nil && hasFinalizer(owner, metav1.FinalizerDeleteDependents):
			waiting = append(waiting, r)
		default:
			solid = append(solid, r)
		}
	}
	return solid, dangling, waiting, nil
}

// dangling reports whether the owner r names is absent: not found in the
// item's namespace (or cluster-wide for a cluster-scoped kind), or found
// with another uid. The live owner is returned when it exists.
func (gc *collector) dangling(
	ctx context.Context,
	r metav1.OwnerReference,
	item objectRef,
) (bool, *metav1.PartialObjectMetadata, error) {
	key := refFromOwner(r, "")
	if _, ok := gc.absent.Get(key); ok {
		return true, nil, nil
	}
	key.Namespace = item.Namespace
	if _, ok := gc.absent.Get(key); ok {
		return true, nil, nil
	}
	resource, namespaced, err := gc.apiResource(r.APIVersion, r.Kind)
	if err != nil {
		return false, nil, err
	}
	if !namespaced {
		key.Namespace = ""
	}
	if item.Namespace == "" && namespaced {
		logr.FromContextOrDiscard(ctx).
			V(2).
			Info("Item is cluster-scoped, but refers to a namespaced owner", "item", item, "owner", r.Name)
		return false, nil, errNamespacedOwnerOfGlobal
	}
	owner, err := gc.metadata.Resource(resource).
		Namespace(nsFor(namespaced, item.Namespace)).
		Get(ctx, r.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		gc.absent.Add(key, nil)
		return true, nil, nil
	case err != nil:
		return false, nil, err
	}
	if owner.UID != r.UID {
		gc.absent.Add(key, nil)
		return true, nil, nil
	}
	return false, owner, nil
}

// processDeletingDependents: an owner deleted in the foreground loses its
// finalizer once no dependent blocks it; until then its blocking
// dependents are queued for deletion.
func (gc *collector) processDeletingDependents(ctx context.Context, n *node) error {
	blockers := n.blockingDependents()
	if len(blockers) == 0 {
		logr.FromContextOrDiscard(ctx).
			V(2).
			Info("Remove DeleteDependents finalizer for item", "item", n.identity())
		return gc.removeFinalizer(ctx, n, metav1.FinalizerDeleteDependents)
	}
	for _, d := range blockers {
		if !d.isDeletingDependents() {
			gc.enqueueDelete(d)
		}
	}
	return nil
}

// attemptToOrphan is the orphan worker's sync: key is the uid of an owner
// being deleted with the orphan finalizer.
func (gc *collector) attemptToOrphan(ctx context.Context, key string) error {
	owner, ok := gc.graph.get(types.UID(key))
	if !ok {
		return nil
	}
	id := owner.identity()
	dependents := owner.dependentList()
	errCh := make(chan error, len(dependents))
	var wg sync.WaitGroup
	for _, d := range dependents {
		wg.Go(func() {
			err := gc.removeOwnerRefs(ctx, d, []types.UID{id.UID})
			if err != nil && !apierrors.IsNotFound(err) {
				errCh <- fmt.Errorf("orphaning %s failed, %w", d.identity(), err)
			}
		})
	}
	wg.Wait()
	close(errCh)
	var errs []error
	for e := range errCh {
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return fmt.Errorf("failed to orphan dependents of owner %s: %w", id, errors.Join(errs...))
	}
	if err := gc.removeFinalizer(ctx, owner, metav1.FinalizerOrphanDependents); err != nil {
		return fmt.Errorf("removeOrphanFinalizer for %s failed: %w", id, err)
	}
	return nil
}

func nsFor(namespaced bool, ns string) string {
	if namespaced {
		return ns
	}
	return ""
}

// apiResource maps apiVersion/kind to its resource and scope.
func (gc *collector) apiResource(
	apiVersion, kind string,
) (schema.GroupVersionResource, bool, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	m, err := gc.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, &mappingError{kind: kind, version: apiVersion}
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func (gc *collector) getObject(
	ctx context.Context,
	id objectRef,
) (*metav1.PartialObjectMetadata, error) {
	r, namespaced, err := gc.apiResource(id.APIVersion, id.Kind)
	if err != nil {
		return nil, err
	}
	ns := nsFor(namespaced, id.Namespace)
	if namespaced && ns == "" {
		return nil, errNamespacedOwnerOfGlobal
	}
	return gc.metadata.Resource(r).Namespace(ns).Get(ctx, id.Name, metav1.GetOptions{})
}

// deleteObject deletes id preconditioned on its uid and, when given, the
// resource version whose owner references were judged; a conflict caused
// by a change that left the owner references alone is retried without the
// resource version.
func (gc *collector) deleteObject(
	ctx context.Context,
	id objectRef,
	rv string,
	owners []metav1.OwnerReference,
	policy metav1.DeletionPropagation,
) error {
	r, namespaced, err := gc.apiResource(id.APIVersion, id.Kind)
	if err != nil {
		return err
	}
	uid := id.UID
	pre := metav1.Preconditions{UID: &uid}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	client := gc.metadata.Resource(r).Namespace(nsFor(namespaced, id.Namespace))
	err = client.Delete(
		ctx,
		id.Name,
		metav1.DeleteOptions{Preconditions: &pre, PropagationPolicy: &policy},
	)
	if apierrors.IsConflict(err) && rv != "" {
		live, lerr := client.Get(ctx, id.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(lerr) {
			return lerr
		}
		if lerr == nil && live.UID == id.UID && live.ResourceVersion != rv &&
			reflect.DeepEqual(live.OwnerReferences, owners) {
			return gc.deleteObject(ctx, id, "", nil, policy)
		}
	}
	return err
}

func (gc *collector) patchObject(
	ctx context.Context,
	id objectRef,
	patch []byte,
	pt types.PatchType,
) error {
	r, namespaced, err := gc.apiResource(id.APIVersion, id.Kind)
	if err != nil {
		return err
	}
	_, err = gc.metadata.Resource(r).
		Namespace(nsFor(namespaced, id.Namespace)).
		Patch(ctx, id.Name, pt, patch, metav1.PatchOptions{})
	return err
}

// patch applies a strategic merge patch, or, where the resource does not
// take one (custom resources), the JSON merge patch jmp makes.
func (gc *collector) patch(
	ctx context.Context,
	n *node,
	smp []byte,
	jmp func() ([]byte, error),
) error {
	id := n.identity()
	err := gc.patchObject(ctx, id, smp, types.StrategicMergePatchType)
	if err == nil || !apierrors.IsUnsupportedMediaType(err) {
		return err
	}
	p, err := jmp()
	if err != nil {
		return err
	}
	return gc.patchObject(ctx, id, p, types.MergePatchType)
}

type refsPatch struct {
	Metadata refsPatchMeta `json:"metadata"`
}

type refsPatchMeta struct {
	ResourceVersion string    `json:"resourceVersion,omitempty"`
	UID             types.UID `json:"uid,omitempty"`
	OwnerReferences []any     `json:"ownerReferences"`
}

// removeOwnerRefs removes the references to uids from n's owner
// references.
func (gc *collector) removeOwnerRefs(ctx context.Context, n *node, uids []types.UID) error {
	id := n.identity()
	smp := refsPatch{Metadata: refsPatchMeta{UID: id.UID}}
	for _, u := range uids {
		smp.Metadata.OwnerReferences = append(
			smp.Metadata.OwnerReferences,
			map[string]string{"$patch": "delete", "uid": string(u)},
		)
	}
	b, err := json.Marshal(smp)
	if err != nil {
		return err
	}
	return gc.patch(ctx, n, b, func() ([]byte, error) {
		cur, err := gc.currentMeta(ctx, id)
		if err != nil {
			return nil, err
		}
		p := refsPatch{
			Metadata: refsPatchMeta{
				ResourceVersion: cur.GetResourceVersion(),
				OwnerReferences: []any{},
			},
		}
		for _, r := range cur.GetOwnerReferences() {
			if !slices.Contains(uids, r.UID) {
				p.Metadata.OwnerReferences = append(p.Metadata.OwnerReferences, r)
			}
		}
		return json.Marshal(p)
	})
}

// unblockOwnerRefs sets blockOwnerDeletion=false on n's blocking
// references.
func (gc *collector) unblockOwnerRefs(ctx context.Context, n *node) error {
	id := n.identity()
	no := false
	smp := refsPatch{Metadata: refsPatchMeta{UID: id.UID}}
	for _, o := range n.ownerRefs() {
		if blocking(o) {
			o.BlockOwnerDeletion = &no
			smp.Metadata.OwnerReferences = append(smp.Metadata.OwnerReferences, o)
		}
	}
	b, err := json.Marshal(smp)
	if err != nil {
		return err
	}
	return gc.patch(ctx, n, b, func() ([]byte, error) {
		cur, err := gc.currentMeta(ctx, id)
		if err != nil {
			return nil, err
		}
		p := refsPatch{
			Metadata: refsPatchMeta{
				ResourceVersion: cur.GetResourceVersion(),
				OwnerReferences: []any{},
			},
		}
		for _, o := range n.ownerRefs() {
			o.BlockOwnerDeletion = &no
			p.Metadata.OwnerReferences = append(p.Metadata.OwnerReferences, o)
		}
		return json.Marshal(p)
	})
}

// currentMeta is the monitor's copy of id, else the live one.
func (gc *collector) currentMeta(ctx context.Context, id objectRef) (metav1.Object, error) {
	r, namespaced, err := gc.apiResource(id.APIVersion, id.Kind)
	if err != nil {
		return nil, err
	}
	ns := nsFor(namespaced, id.Namespace)
	if m, ok := gc.cached(r, ns, id.Name); ok {
		return m, nil
	}
	return gc.metadata.Resource(r).Namespace(ns).Get(ctx, id.Name, metav1.GetOptions{})
}

// removeFinalizer removes finalizer from the owner n names, with a JSON
// merge patch preconditioned on the resource version read, retried on
// conflicts.
func (gc *collector) removeFinalizer(ctx context.Context, n *node, finalizer string) error {
	id := n.identity()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := gc.getObject(ctx, id)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf(
				"cannot finalize owner %s, because cannot get it: %w. The garbage collector will retry later",
				id,
				err,
			)
		}
		if !slices.Contains(cur.Finalizers, finalizer) {
			return nil
		}
		kept := slices.DeleteFunc(
			slices.Clone(cur.Finalizers),
			func(f string) bool { return f == finalizer },
		)
		if len(kept) == 0 {
			kept = nil
		}
		b, err := json.Marshal(
			map[string]any{
				"metadata": map[string]any{
					"resourceVersion": cur.ResourceVersion,
					"finalizers":      kept,
				},
			},
		)
		if err != nil {
			return err
		}
		return gc.patchObject(ctx, id, b, types.MergePatchType)
	})
	if apierrors.IsConflict(err) {
		return fmt.Errorf(
			"updateMaxRetries(%d) has reached. The garbage collector will retry later for owner %s",
			retry.DefaultBackoff.Steps,
			id,
		)
	}
	return err
}
