package replicaset

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/controllers/internal/ownership"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// Event reasons this package records besides podcontrol's.
const (
	// reasonInvalidSelector: the object's selector does not parse or is
	// empty; it is not synced until it changes.
	reasonInvalidSelector = "InvalidSelector"
	// reasonInvalidOwnerRefs: a pod that would be the object's has
	// malformed ownerReferences; it is left alone and not counted.
	reasonInvalidOwnerRefs = "InvalidOwnerReferences"
)

// slowStartInitialBatch is the size of the first batch of creates.
const slowStartInitialBatch = 1

// selectorOf parses rs's selector. A nil or empty selector is an error: it
// would select every pod in the namespace, and the API server rejects it.
func selectorOf(rs *appsv1.ReplicaSet) (labels.Selector, error) {
	s := rs.Spec.Selector
	if s == nil || len(s.MatchLabels)+len(s.MatchExpressions) == 0 {
		return nil, errors.New("selector is empty; it would select every pod")
	}
	return metav1.LabelSelectorAsSelector(s)
}

// sync brings one object's pods and status in line with its spec. It must
// not run concurrently for the same key (the workqueue ensures that).
func (c *controller) sync(ctx context.Context, key string) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("kind", c.kindName, "key", key)
	start := c.clock.Now()
	defer func() { log.V(4).Info("Finished syncing", "duration", c.clock.Since(start)) }()

	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	rs, err := c.kind.get(namespace, name)
	if apierrors.IsNotFound(err) {
		log.V(4).Info("Deleted")
		c.exp.Delete(key)
		return nil
	}
	if err != nil {
		return err
	}

	needsManage := c.exp.Satisfied(key)
	selector, err := selectorOf(rs)
	if err != nil {
		c.recorder.Eventf(
			c.kind.object(rs),
			corev1.EventTypeWarning,
			reasonInvalidSelector,
			"Invalid selector: %v",
			err,
		)
		return workloop.Permanent(fmt.Errorf("%s %s: invalid selector: %w", c.kindName, key, err))
	}

	// Pods controlled by rs, plus orphans that might be adopted. They come
	// from the cache: read-only.
	all, err := c.podsOf(rs)
	if err != nil {
		return err
	}
	var active []*corev1.Pod
	var refErrs []error
	for _, p := range all {
		if !podstate.IsActive(p) {
			continue
		}
		if err := ownership.ValidateOwnerRefs(p); err != nil {
			c.recorder.Eventf(
				c.kind.object(rs),
				corev1.EventTypeWarning,
				reasonInvalidOwnerRefs,
				"Ignoring pod: %v",
				err,
			)
			refErrs = append(refErrs, err)
			continue
		}
		active = append(active, p)
	}
	active, err = c.claim(ctx, rs, selector, active)
	if err != nil {
		return err
	}

	var terminating *int32
	if c.terminating {
		n := int32(0)
		for _, p := range all {
			if podstate.IsTerminating(p) && metav1.IsControlledBy(p, rs) &&
				selector.Matches(labels.Set(p.Labels)) {
				n++
			}
		}
		terminating = &n
	}

	var manageErr error
	if needsManage && rs.DeletionTimestamp == nil {
		manageErr = c.manageReplicas(ctx, log, key, rs, active)
	}

	rs = rs.DeepCopy()
	now := c.clock.Now() // one instant for status and the next check
	updated, err := c.updateStatus(
		ctx,
		rs,
		calculateStatus(rs, active, terminating, manageErr, now),
	)
	if err != nil {
		return err
	}
	if manageErr != nil {
		return manageErr
	}
	if mrs := updated.Spec.MinReadySeconds; mrs > 0 &&
		updated.Status.ReadyReplicas != updated.Status.AvailableReplicas {
		next := time.Duration(mrs) * time.Second
		if d := nextAvailabilityCheck(active, mrs, now, c.clock.Now()); d != nil {
			next = *d
		}
		c.enqueueAfter(key, next)
	}
	if len(refErrs) > 0 {
		// Retrying changes nothing; an update of the pod enqueues us again.
		return workloop.Permanent(errors.Join(refErrs...))
	}
	return nil
}

// podsOf returns the cached pods controlled by rs and the orphans in its
// namespace.
func (c *controller) podsOf(rs *appsv1.ReplicaSet) ([]*corev1.Pod, error) {
	return index.OwnedAndOrphans(c.podIndexer, rs.Namespace, c.kindName, rs.Name, rs.UID)
}

// claim adopts and releases pods for rs and returns those it controls.
// Adoption first rereads rs from the API server.
func (c *controller) claim(
	ctx context.Context,
	rs *appsv1.ReplicaSet,
	selector labels.Selector,
	pods []*corev1.Pod,
) ([]*corev1.Pod, error) {
	m, err := ownership.New[*corev1.Pod](ownership.Config{
		Owner:     rs,
		OwnerKind: c.kind.gvk(),
		Selector:  selector,
		Patch:     c.pods.PatchPod,
		Recheck: func(ctx context.Context) (metav1.Object, error) {
			return c.kind.fresh(ctx, rs.Namespace, rs.Name)
		},
	})
	if err != nil {
		return nil, err
	}
	return m.Claim(ctx, pods)
}

// manageReplicas creates or deletes pods so that active (rs's claimed active
// pods, not modified) reaches spec.replicas, at most burst at a time.
func (c *controller) manageReplicas(
	ctx context.Context,
	log logr.Logger,
	key string,
	rs *appsv1.ReplicaSet,
	active []*corev1.Pod,
) error {
	want := int(replicasOf(rs))
	diff := len(active) - want
	owner := c.kind.object(rs)
	switch {
	case diff < 0:
		n := min(-diff, c.burst)
		// Expect them all before the first create: a watch event may
		// arrive before Create returns.
		c.exp.ExpectCreations(key, n)
		log.V(2).Info("Too few replicas", "want", want, "creating", n)
		ref := metav1.NewControllerRef(rs, c.kind.gvk())
		created, err := slowStartBatch(n, slowStartInitialBatch, func() error {
			err := c.pods.CreatePod(ctx, rs.Namespace, &rs.Spec.Template, owner, ref)
			if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return nil // every create will fail; nothing to retry
			}
			return err
		})
		if skipped := n - created; skipped > 0 {
			// Never attempted or failed: never observed either.
			log.V(2).Info("Slow-start failure; skipping the remaining creates", "skipped", skipped)
			c.exp.LowerCreations(key, skipped)
		}
		return err

	case diff > 0:
		n := min(diff, c.burst)
		log.V(2).Info("Too many replicas", "want", want, "deleting", n)
		related, err := c.relatedPods(log, rs)
		if err != nil {
			log.Error(err, "Listing related pods for ranking; ranking without them")
		}
		victims := podsToDelete(active, related, n, c.clock.Now(), c.cost)
		keys := make([]string, len(victims))
		for i, p := range victims {
			keys[i] = podKey(p)
		}
		// Expected by name, so that a pod seen first as terminating and
		// then as deleted counts once.
		c.exp.ExpectDeletions(key, keys)
		errs := make(chan error, len(victims))
		var wg sync.WaitGroup
		for _, p := range victims {
			wg.Go(func() {
				err := c.pods.DeletePod(ctx, rs.Namespace, p.Name, owner)
				if err == nil {
					return
				}
				c.exp.DeletionObserved(key, podKey(p)) // it will not be observed
				if !apierrors.IsNotFound(err) {
					log.V(2).Info("Failed to delete pod", "pod", podKey(p), "err", err.Error())
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs // the first failure, if any; all were reported as events
	}
	return nil
}

// slowStartBatch calls fn count times in batches of growing size (initial,
// then doubling), each batch concurrently, and stops after the first batch
// with a failure. It returns how many calls succeeded and the first error.
// A flood of creates that would all fail the same way (quota, say) thus
// costs a handful of calls and events.
func slowStartBatch(count, initial int, fn func() error) (int, error) {
	done := 0
	for size := min(count, initial); size > 0; size = min(2*size, count-done) {
		errs := make(chan error, size)
		var wg sync.WaitGroup
		for range size {
			wg.Go(func() {
				if err := fn(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		done += size - len(errs)
		if err := <-errs; err != nil {
			return done, err
		}
	}
	return done, nil
}

// relatedPods returns the pods of every object of this kind that shares
// rs's controller (for a Deployment: its other ReplicaSets), each once.
// Without a controller there are none.
func (c *controller) relatedPods(log logr.Logger, rs *appsv1.ReplicaSet) ([]*corev1.Pod, error) {
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return nil, nil
	}
	objs, err := c.ownerIndex.ByIndex(index.ByControllerUID, string(ref.UID))
	if err != nil {
		return nil, err
	}
	seen := map[types.UID]bool{}
	var out []*corev1.Pod
	for _, o := range objs {
		sibling, ok := c.kind.view(o)
		if !ok || sibling.Namespace != rs.Namespace {
			continue
		}
		sel, err := selectorOf(sibling)
		if err != nil {
			continue // selects nothing
		}
		pods, err := c.podLister.Pods(sibling.Namespace).List(sel)
		if err != nil {
			return nil, err
		}
		for _, p := range pods {
			if !seen[p.UID] {
				seen[p.UID] = true
				out = append(out, p)
			}
		}
	}
	log.V(4).Info("Found related pods", "objects", len(objs), "pods", len(out))
	return out, nil
}
