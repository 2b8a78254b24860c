package namespace

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/apiresources"
)

// finalizerSeconds is the wait assumed for objects held by finalizers (a
// garbage collector finishing, say) before the namespace is looked at
// again, as in KCM.
const finalizerSeconds = int64(15)

var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

// contentRemainingError reports that content was deleted but has not gone
// yet; estimate is KCM's guess, in seconds, of how long it will take.
type contentRemainingError struct{ estimate int64 }

func (e *contentRemainingError) Error() string {
	return fmt.Sprintf(
		"some content remains in the namespace, estimate %d seconds before it is removed",
		e.estimate,
	)
}

// deleter empties one namespace at a time of every namespaced resource the
// server offers, then removes the kubernetes finalizer.
type deleter struct {
	namespaces corev1client.NamespaceInterface
	pods       corev1client.PodsGetter
	meta       metadata.Interface
	// discover returns the server's preferred namespaced resources; a
	// partial answer comes with a discovery.ErrGroupDiscoveryFailed.
	discover func() ([]*metav1.APIResourceList, error)
	clock    clock.PassiveClock
	token    corev1.FinalizerName
}

func newDeleter(
	client kubernetes.Interface,
	meta metadata.Interface,
	discover func() ([]*metav1.APIResourceList, error),
	c clock.PassiveClock,
) *deleter {
	return &deleter{
		namespaces: client.CoreV1().Namespaces(),
		pods:       client.CoreV1(),
		meta:       meta,
		discover:   discover,
		clock:      c,
		token:      corev1.FinalizerKubernetes,
	}
}

// delete works the named namespace once: it marks it Terminating, deletes
// its content and, once nothing is left, removes the finalizer. It returns
// a *contentRemainingError while content is on its way out.
func (d *deleter) delete(ctx context.Context, name string) error {
	// Other controllers edit a terminating namespace too: start from the
	// server's copy.
	ns, err := d.namespaces.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil {
		return nil
	}
	logr.FromContextOrDiscard(ctx).
		V(5).
		Info("Emptying namespace", "namespace", name, "finalizer", d.token)
	ns, err = d.retryOnConflict(ctx, ns, d.markTerminating)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp.IsZero() || len(ns.Spec.Finalizers) == 0 {
		return nil
	}
	estimate, ns, err := d.deleteAllContent(ctx, ns)
	if err != nil {
		return err
	}
	if estimate > 0 {
		return &contentRemainingError{estimate}
	}
	if _, err := d.retryOnConflict(ctx, ns, d.finalize); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// retryOnConflict calls update until it does not conflict, each retry on a
// fresh copy of the namespace, failing if the namespace was replaced.
func (d *deleter) retryOnConflict(
	ctx context.Context,
	ns *corev1.Namespace,
	update func(context.Context, *corev1.Namespace) (*corev1.Namespace, error),
) (*corev1.Namespace, error) {
	for {
		out, err := update(ctx, ns)
		if !apierrors.IsConflict(err) {
			return out, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		fresh, err := d.namespaces.Get(ctx, ns.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if fresh.UID != ns.UID {
			return nil, fmt.Errorf("namespace uid has changed across retries")
		}
		ns = fresh
	}
}

// markTerminating sets status.phase to Terminating on a namespace being
// deleted.
func (d *deleter) markTerminating(
	ctx context.Context,
	ns *corev1.Namespace,
) (*corev1.Namespace, error) {
	if ns.DeletionTimestamp.IsZero() || ns.Status.Phase == corev1.NamespaceTerminating {
		return ns, nil
	}
	out := ns.DeepCopy()
	out.Status.Phase = corev1.NamespaceTerminating
	return d.namespaces.UpdateStatus(ctx, out, metav1.UpdateOptions{})
}

// finalize removes the controller's token from spec.finalizers through the
// finalize subresource, leaving the others sorted and without duplicates.
func (d *deleter) finalize(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	keep := sets.New[string]()
	for _, f := range ns.Spec.Finalizers {
		if f != d.token {
			keep.Insert(string(f))
		}
	}
	out := &corev1.Namespace{ObjectMeta: *ns.ObjectMeta.DeepCopy(), Spec: *ns.Spec.DeepCopy()}
	out.Spec.Finalizers = make([]corev1.FinalizerName, 0, keep.Len())
	for _, f := range sets.List(keep) {
		out.Spec.Finalizers = append(out.Spec.Finalizers, corev1.FinalizerName(f))
	}
	return d.namespaces.Finalize(ctx, out, metav1.UpdateOptions{})
}

// remaining is what one resource, or all of them, left in a namespace
// after a pass.
type remaining struct {
	// estimate is how many seconds more to wait; zero is no estimate, not
	// a promise that nothing remains.
	estimate int64
	count    int
	// byFinalizer counts the objects left per finalizer they carry.
	byFinalizer map[string]int
}

// deleteAllContent deletes the namespace's objects of every deletable
// namespaced resource, pods first, and records the outcome in the
// namespace's conditions. It returns the longest estimate of the time the
// remaining objects need, and the namespace as last written.
func (d *deleter) deleteAllContent(
	ctx context.Context,
	ns *corev1.Namespace,
) (int64, *corev1.Namespace, error) {
	log := logr.FromContextOrDiscard(ctx)
	deletedAt := *ns.DeletionTimestamp
	conds := conditionUpdater{now: metav1.NewTime(d.clock.Now())}
	var errs []error

	// Discovery failures are not fatal: go on with what was found.
	lists, err := d.discover()
	if err != nil {
		errs = append(errs, err)
		conds.discoveryFailed(err)
	}
	resources, err := deletable(lists)
	if err != nil {
		errs = append(errs, err)
		conds.groupVersionFailed(err)
	}
	ops := supportedOps(lists)

	var estimate int64
	byResource := map[schema.GroupVersionResource]int{}
	byFinalizer := map[string]int{}
	tally := func(gvr schema.GroupVersionResource, r remaining) {
		estimate = max(estimate, r.estimate)
		if r.count == 0 {
			return
		}
		byResource[gvr] = r.count
		for f, n := range r.byFinalizer {
			byFinalizer[f] += n
		}
	}

	// Pods go first: their containers may still use the other content
	// (secrets, config maps) while they terminate.
	if _, ok := resources[podsResource]; ok {
		r, err := d.deleteResource(ctx, ops, podsResource, ns.Name, deletedAt)
		if err != nil {
			errs = append(
				errs,
				fmt.Errorf("failed to delete pods for namespace: %s, err: %w", ns.Name, err),
			)
			conds.contentFailed(err)
		}
		tally(podsResource, r)
		if byResource[podsResource] > 0 {
			log.V(5).Info("Pods remain; deleting the other content later", "namespace", ns.Name)
			ns = d.writeConditions(ctx, ns, &conds)
			return estimate, ns, utilerrors.NewAggregate(errs)
		}
	}
	for _, gvr := range sorted(resources) {
		if gvr == podsResource {
			continue
		}
		// A failure on one resource does not stop the others.
		r, err := d.deleteResource(ctx, ops, gvr, ns.Name, deletedAt)
		if err != nil {
			errs = append(errs, err)
			conds.contentFailed(err)
		}
		tally(gvr, r)
	}
	conds.contentRemaining(byResource, byFinalizer)
	// Always written when changed: a condition may go back to its "ok"
	// variant, and the namespace may keep other finalizers after ours.
	ns = d.writeConditions(ctx, ns, &conds)
	err = utilerrors.NewAggregate(errs)
	log.V(4).
		Info("Deleted namespace content", "namespace", ns.Name, "estimate", estimate, "err", err)
	return estimate, ns, err
}

// writeConditions applies conds to ns and writes the status when it
// changed, returning the namespace as written (ns itself when nothing was
// written or the write failed: the failure is logged, not returned).
func (d *deleter) writeConditions(
	ctx context.Context,
	ns *corev1.Namespace,
	conds *conditionUpdater,
) *corev1.Namespace {
	ns = ns.DeepCopy()
	if !conds.apply(&ns.Status) {
		return ns
	}
	out, err := d.namespaces.UpdateStatus(ctx, ns, metav1.UpdateOptions{})
	if err != nil {
		logr.FromContextOrDiscard(ctx).
			Error(err, "Couldn't update status condition for namespace", "namespace", ns.Name)
		return ns
	}
	return out
}

// deletable returns the resources of lists that support delete. Like
// KCM, a group version that does not parse spoils the whole answer: no
// resource is returned, and the error says which.
func deletable(lists []*metav1.APIResourceList) (map[schema.GroupVersionResource]struct{}, error) {
	withDelete := apiresources.Filter(lists, apiresources.Namespaced, "delete")
	for _, l := range lists {
		if l == nil {
			continue
		}
		if _, err := schema.ParseGroupVersion(l.GroupVersion); err != nil && hasVerb(l, "delete") {
			return nil, err
		}
	}
	return withDelete, nil
}

func hasVerb(l *metav1.APIResourceList, verb string) bool {
	for _, r := range l.APIResources {
		if slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// ops records which resources support list and deletecollection.
type ops struct {
	list, deleteCollection map[schema.GroupVersionResource]struct{}
}

func supportedOps(lists []*metav1.APIResourceList) ops {
	return ops{
		list:             apiresources.Filter(lists, apiresources.Namespaced, "list"),
		deleteCollection: apiresources.Filter(lists, apiresources.Namespaced, "deletecollection"),
	}
}

func has(set map[schema.GroupVersionResource]struct{}, gvr schema.GroupVersionResource) bool {
	_, ok := set[gvr]
	return ok
}

// sorted orders resources by group, version and resource, so that every
// pass deletes in the same order.
func sorted(set map[schema.GroupVersionResource]struct{}) []schema.GroupVersionResource {
	out := make([]schema.GroupVersionResource, 0, len(set))
	for gvr := range set {
		out = append(out, gvr)
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionResource) int {
		return cmp.Or(
			cmp.Compare(a.Group, b.Group),
			cmp.Compare(a.Version, b.Version),
			cmp.Compare(a.Resource, b.Resource),
		)
	})
	return out
}

// deleteResource deletes the namespace's objects of one resource, by
// collection where the server supports it, else one by one, and tells
// what is left.
func (d *deleter) deleteResource(
	ctx context.Context,
	o ops,
	gvr schema.GroupVersionResource,
	ns string,
	deletedAt metav1.Time,
) (remaining, error) {
	log := logr.FromContextOrDiscard(ctx).V(5).WithValues("namespace", ns, "resource", gvr)
	estimate, err := d.estimate(ctx, gvr, ns, deletedAt)
	if err != nil {
		log.Info("Unable to estimate the deletion time", "err", err)
		return remaining{}, err
	}
	done, err := d.deleteCollection(ctx, o, gvr, ns)
	if err != nil {
		return remaining{estimate: estimate}, err
	}
	if !done {
		if err := d.deleteEach(ctx, o, gvr, ns); err != nil {
			return remaining{estimate: estimate}, err
		}
	}
	left, listed, err := d.list(ctx, o, gvr, ns)
	if err != nil {
		log.Info("Unable to verify that nothing is left", "err", err)
		return remaining{estimate: estimate}, err
	}
	if !listed {
		return remaining{estimate: estimate}, nil
	}
	if len(left.Items) == 0 {
		return remaining{}, nil
	}
	byFinalizer := map[string]int{}
	for _, item := range left.Items {
		for _, f := range item.Finalizers {
			byFinalizer[f]++
		}
	}
	log.Info("Objects remain", "count", len(left.Items), "finalizers", byFinalizer)
	switch {
	case estimate != 0:
		return remaining{estimate: estimate, count: len(left.Items), byFinalizer: byFinalizer}, nil
	case len(byFinalizer) > 0:
		// Finalizers are a normal reason to wait; give them time.
		return remaining{
			estimate:    finalizerSeconds,
			count:       len(left.Items),
			byFinalizer: byFinalizer,
		}, nil
	}
	// Nothing explains why they are still here.
	return remaining{estimate: estimate, count: len(left.Items)},
		fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", ns, gvr)
}

// background: the namespace controller deletes everything itself, so it
// asks the garbage collector not to orphan (no orphan finalizer).
func backgroundDelete() metav1.DeleteOptions {
	background := metav1.DeletePropagationBackground
	return metav1.DeleteOptions{PropagationPolicy: &background}
}

// unsupported reports errors that mean the operation is not offered: a
// resource discovery lists may still answer 404 rather than 405.
func unsupported(err error) bool {
	return apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err)
}

// deleteCollection deletes all the namespace's objects of gvr at once. It
// returns false when the server does not support that.
func (d *deleter) deleteCollection(
	ctx context.Context,
	o ops,
	gvr schema.GroupVersionResource,
	ns string,
) (bool, error) {
	if !has(o.deleteCollection, gvr) {
		return false, nil
	}
	err := d.meta.Resource(gvr).
		Namespace(ns).
		DeleteCollection(ctx, backgroundDelete(), metav1.ListOptions{})
	if err != nil && unsupported(err) {
		return false, nil
	}
	return true, err
}

// list lists the namespace's objects of gvr; listed is false when the
// server does not support listing them.
func (d *deleter) list(
	ctx context.Context,
	o ops,
	gvr schema.GroupVersionResource,
	ns string,
) (items *metav1.PartialObjectMetadataList, listed bool, err error) {
	if !has(o.list, gvr) {
		return nil, false, nil
	}
	items, err = d.meta.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
		return items, true, nil
	case unsupported(err):
		return nil, false, nil
	}
	return nil, true, err
}

// deleteEach lists the namespace's objects of gvr and deletes them one by
// one.
func (d *deleter) deleteEach(
	ctx context.Context,
	o ops,
	gvr schema.GroupVersionResource,
	ns string,
) error {
	items, listed, err := d.list(ctx, o, gvr, ns)
	if err != nil || !listed {
		return err
	}
	for _, item := range items.Items {
		err := d.meta.Resource(gvr).Namespace(ns).Delete(ctx, item.Name, backgroundDelete())
		if err != nil && !unsupported(err) {
			return err
		}
	}
	return nil
}

// estimate guesses how many seconds the objects of gvr need to go once
// deleted: for pods, the longest grace period of the pods not yet
// finished, unless that much time has passed since the namespace's
// deletion; zero for everything else.
func (d *deleter) estimate(
	ctx context.Context,
	gvr schema.GroupVersionResource,
	ns string,
	deletedAt metav1.Time,
) (int64, error) {
	if gvr.GroupResource() != podsResource.GroupResource() {
		return 0, nil
	}
	pods, err := d.pods.Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	var longest int64
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if g := p.Spec.TerminationGracePeriodSeconds; g != nil && *g > longest {
			longest = *g
		}
	}
	if d.clock.Since(deletedAt.Time) >= time.Duration(longest)*time.Second {
		return 0, nil
	}
	return longest, nil
}
