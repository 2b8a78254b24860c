package deployment

import (
	"context"
	"fmt"
	"strconv"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/controllers/internal/ownership"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podtemplate"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// sync brings one Deployment's ReplicaSets and status in line with its
// spec. The workqueue never runs it concurrently for one key.
func (c *controller) sync(ctx context.Context, key string) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("deployment", key)
	ctx = logr.NewContext(ctx, log)
	start := c.clock.Now()
	defer func() { log.V(4).Info("Finished syncing", "duration", c.clock.Since(start)) }()

	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	cached, err := c.dLister.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		log.V(2).Info("Deployment has been deleted")
		return nil
	}
	if err != nil {
		return err
	}
	err = c.syncDeployment(ctx, cached.DeepCopy())
	if err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return nil // every write in the namespace fails from now on
	}
	return err
}

// selectsAll: the selector is present and empty.
func selectsAll(s *metav1.LabelSelector) bool {
	return s != nil && len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}

// syncDeployment is one pass over d, a copy the caller owns.
func (c *controller) syncDeployment(ctx context.Context, d *appsv1.Deployment) error {
	if selectsAll(d.Spec.Selector) {
		c.recorder.Eventf(
			d,
			corev1.EventTypeWarning,
			eventSelectingAll,
			"This deployment is selecting all pods. A non-empty selector is required.",
		)
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			_ = c.writeStatus(ctx, d) // as KCM: best effort
		}
		return nil
	}
	rsList, err := c.claimReplicaSets(ctx, d)
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		return c.syncStatusOnly(ctx, d, rsList)
	}
	// A paused or resumed Deployment gets an Unknown Progressing condition,
	// so that the time spent paused never counts against its deadline.
	if err := c.checkPausedConditions(ctx, d); err != nil {
		return err
	}
	if d.Spec.Paused {
		return c.syncScale(ctx, d, rsList)
	}
	if rollbackTo(d) != nil {
		return c.rollback(ctx, d, rsList)
	}
	scaling, err := c.isScalingEvent(ctx, d, rsList)
	if err != nil {
		return err
	}
	if scaling {
		return c.syncScale(ctx, d, rsList)
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return c.rolloutRecreate(ctx, d, rsList, c.podsByReplicaSet(rsList))
	case appsv1.RollingUpdateDeploymentStrategyType:
		return c.rolloutRolling(ctx, d, rsList)
	}
	return workloop.Permanent(
		fmt.Errorf(
			"deployment %s: spec.strategy.type %q is not supported",
			keyOf(d),
			d.Spec.Strategy.Type,
		),
	)
}

// claimReplicaSets returns the ReplicaSets d controls, after adopting
// matching orphans and releasing owned ones that stopped matching.
func (c *controller) claimReplicaSets(
	ctx context.Context,
	d *appsv1.Deployment,
) ([]*appsv1.ReplicaSet, error) {
	all, err := c.rsLister.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, workloop.Permanent(
			fmt.Errorf("deployment %s has an invalid spec.selector: %w", keyOf(d), err),
		)
	}
	m, err := ownership.New[*appsv1.ReplicaSet](ownership.Config{
		Owner:     d,
		OwnerKind: deploymentKind,
		Selector:  sel,
		Patch: func(ctx context.Context, namespace, name string, patch []byte) error {
			rs, err := c.client.AppsV1().
				ReplicaSets(namespace).
				Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			if err == nil {
				c.loop.Wrote(keyOf(d), rs)
			}
			return err
		},
		Recheck: func(ctx context.Context) (metav1.Object, error) {
			return c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		},
	})
	if err != nil {
		return nil, err
	}
	return m.Claim(ctx, all)
}

// podsByReplicaSet maps each ReplicaSet's UID to the cached pods it
// controls (not to be modified).
func (c *controller) podsByReplicaSet(rsList []*appsv1.ReplicaSet) map[types.UID][]*corev1.Pod {
	out := make(map[types.UID][]*corev1.Pod, len(rsList))
	for _, rs := range rsList {
		pods, err := index.Pods(
			c.podIndexer,
			index.Key(rs.Namespace, "ReplicaSet", rs.Name, rs.UID),
		)
		if err != nil {
			continue
		}
		out[rs.UID] = pods
	}
	return out
}

// writeStatus writes d's status (and, as KCM's status writes do, its
// annotations: the status subresource of Deployments keeps metadata
// changes other than labels). d's resourceVersion follows the write, so a
// second write in the same sync does not conflict with the first.
func (c *controller) writeStatus(ctx context.Context, d *appsv1.Deployment) error {
	updated, err := c.client.AppsV1().
		Deployments(d.Namespace).
		UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	d.ResourceVersion = updated.ResourceVersion
	c.loop.Wrote(keyOf(d), updated)
	return nil
}

// writeReplicaSet writes rs (spec and metadata).
func (c *controller) writeReplicaSet(
	ctx context.Context,
	d *appsv1.Deployment,
	rs *appsv1.ReplicaSet,
) (*appsv1.ReplicaSet, error) {
	updated, err := c.client.AppsV1().
		ReplicaSets(rs.Namespace).
		Update(ctx, rs, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	c.loop.Wrote(keyOf(d), updated)
	return updated, nil
}

// syncStatusOnly updates the status of a Deployment being deleted.
func (c *controller) syncStatusOnly(
	ctx context.Context,
	d *appsv1.Deployment,
	rsList []*appsv1.ReplicaSet,
) error {
	newRS, oldRSs, err := c.replicaSetsAndRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	return c.syncStatus(ctx, append(oldRSs, newRS), newRS, d)
}

// syncScale handles a paused Deployment and a resize outside a rollout:
// it scales, and a paused Deployment's history is cleaned up.
func (c *controller) syncScale(
	ctx context.Context,
	d *appsv1.Deployment,
	rsList []*appsv1.ReplicaSet,
) error {
	newRS, oldRSs, err := c.replicaSetsAndRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	if err := c.scale(ctx, d, newRS, oldRSs); err != nil {
		return err
	}
	if d.Spec.Paused && rollbackTo(d) == nil {
		if err := c.cleanup(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncStatus(ctx, append(oldRSs, newRS), newRS, d)
}

// checkPausedConditions records a pause or a resume in the Progressing
// condition, unless the deadline was already exceeded.
func (c *controller) checkPausedConditions(ctx context.Context, d *appsv1.Deployment) error {
	if !hasProgressDeadline(d) {
		return nil
	}
	cond := getCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == reasonTimedOut {
		return nil
	}
	pausedCond := cond != nil && cond.Reason == reasonPaused
	switch {
	case d.Spec.Paused && !pausedCond:
		setCondition(
			&d.Status,
			newCondition(
				appsv1.DeploymentProgressing,
				corev1.ConditionUnknown,
				reasonPaused,
				"Deployment is paused",
				c.clock.Now(),
			),
		)
	case !d.Spec.Paused && pausedCond:
		setCondition(
			&d.Status,
			newCondition(
				appsv1.DeploymentProgressing,
				corev1.ConditionUnknown,
				reasonResumed,
				"Deployment is resumed",
				c.clock.Now(),
			),
		)
	default:
		return nil
	}
	return c.writeStatus(ctx, d)
}

// replicaSetsAndRevision splits rsList into the new ReplicaSet (created
// when create is set and there is none) and the old ones, and brings the
// revision annotations of the new ReplicaSet and of d up to date.
func (c *controller) replicaSetsAndRevision(
	ctx context.Context,
	d *appsv1.Deployment,
	rsList []*appsv1.ReplicaSet,
	create bool,
) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	oldRSs := findOld(d, rsList)
	newRS, err := c.newReplicaSet(ctx, d, rsList, oldRSs, create)
	if err != nil {
		return nil, nil, err
	}
	return newRS, oldRSs, nil
}

// newReplicaSet returns the ReplicaSet with d's template, nil if there is
// none and create is false. An existing one gets its annotations and
// minReadySeconds synced (and is returned as written); d gets its
// revision. A created one is named after the template's hash; a name taken
// by a ReplicaSet that is not d's new one is a hash collision, counted in
// status.collisionCount for the next attempt.
func (c *controller) newReplicaSet(
	ctx context.Context,
	d *appsv1.Deployment,
	rsList, oldRSs []*appsv1.ReplicaSet,
	create bool,
) (*appsv1.ReplicaSet, error) {
	log := logr.FromContextOrDiscard(ctx)
	existing := findNew(d, rsList)
	newRevision := maxRevision(oldRSs) + 1
	now := c.clock.Now()

	if existing != nil {
		rs := existing.DeepCopy()
		annotated := setNewRSAnnotations(d, rs, newRevision, true)
		if annotated || rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			return c.writeReplicaSet(ctx, d, rs)
		}
		changed := setDeploymentRevision(d, rs.Annotations[annotationRevision])
		if hasProgressDeadline(d) && getCondition(d.Status, appsv1.DeploymentProgressing) == nil {
			setCondition(
				&d.Status,
				newCondition(
					appsv1.DeploymentProgressing,
					corev1.ConditionTrue,
					reasonFoundNewReplicaSet,
					fmt.Sprintf("Found new replica set %q", rs.Name),
					now,
				),
			)
			changed = true
		}
		if changed {
			if err := c.writeStatus(ctx, d); err != nil {
				return nil, err
			}
		}
		return rs, nil
	}
	if !create {
		return nil, nil
	}

	template := *d.Spec.Template.DeepCopy()
	hash := podtemplate.Hash(&template, d.Status.CollisionCount)
	template.Labels = withLabel(
		d.Spec.Template.Labels,
		appsv1.DefaultDeploymentUniqueLabelKey,
		hash,
	)
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withLabel(
		selector.MatchLabels,
		appsv1.DefaultDeploymentUniqueLabelKey,
		hash,
	)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            replicaSetName(d.Name, hash),
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, deploymentKind)},
			Labels:          template.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        new(int32),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selector,
			Template:        template,
		},
	}
	size, err := newReplicaCount(d, append(oldRSs, rs), rs)
	if err != nil {
		return nil, workloop.Permanent(err)
	}
	*rs.Spec.Replicas = size
	setNewRSAnnotations(d, rs, newRevision, false)

	alreadyExists := false
	created, err := c.client.AppsV1().
		ReplicaSets(d.Namespace).
		Create(ctx, rs, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		alreadyExists = true
		found, getErr := c.rsLister.ReplicaSets(rs.Namespace).Get(rs.Name)
		if getErr != nil {
			return nil, getErr
		}
		if ref := metav1.GetControllerOfNoCopy(found); ref != nil && ref.UID == d.UID &&
			sameTemplate(&d.Spec.Template, &found.Spec.Template) {
			created, err = found, nil
			break
		}
		// A hash collision: the next attempt hashes with a higher count.
		before := int32(0)
		if d.Status.CollisionCount != nil {
			before = *d.Status.CollisionCount
		}
		d.Status.CollisionCount = new(before + 1)
		if werr := c.writeStatus(ctx, d); werr == nil {
			log.V(2).
				Info("Found a hash collision; bumping collisionCount", "replicaSet", rs.Name,
					"oldCollisionCount", before, "newCollisionCount", before+1)
		}
		return nil, err
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, err
	case err != nil:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
		if hasProgressDeadline(d) {
			setCondition(
				&d.Status,
				newCondition(
					appsv1.DeploymentProgressing,
					corev1.ConditionFalse,
					reasonReplicaSetCreateErr,
					msg,
					now,
				),
			)
			_ = c.writeStatus(ctx, d) // the create's failure is what matters
		}
		c.recorder.Eventf(d, corev1.EventTypeWarning, eventReplicaSetCreateError, "%s", msg)
		return nil, err
	default:
		c.loop.Wrote(keyOf(d), created)
	}
	if !alreadyExists && size > 0 {
		c.recorder.Eventf(
			d,
			corev1.EventTypeNormal,
			eventScalingReplicaSet,
			"Scaled up replica set %s from 0 to %d",
			created.Name,
			size,
		)
	}
	changed := setDeploymentRevision(d, strconv.FormatInt(newRevision, 10))
	if !alreadyExists && hasProgressDeadline(d) {
		setCondition(
			&d.Status,
			newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewReplicaSet,
				fmt.Sprintf("Created new replica set %q", created.Name), now),
		)
		changed = true
	}
	if changed {
		err = c.writeStatus(ctx, d)
	}
	return created, err
}

// withLabel returns a copy of m with k=v.
func withLabel(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for key, val := range m {
		out[key] = val
	}
	out[k] = v
	return out
}

// isScalingEvent: an active ReplicaSet was sized for a different
// spec.replicas than d has now.
func (c *controller) isScalingEvent(
	ctx context.Context,
	d *appsv1.Deployment,
	rsList []*appsv1.ReplicaSet,
) (bool, error) {
	newRS, oldRSs, err := c.replicaSetsAndRevision(ctx, d, rsList, false)
	if err != nil {
		return false, err
	}
	for _, rs := range active(append(oldRSs, newRS)) {
		if want, ok := annotationCount(rs, annotationDesiredReplicas); ok && want != desiredOf(d) {
			return true, nil
		}
	}
	return false, nil
}

// scale resizes the ReplicaSets when d was resized or is paused: a single
// active ReplicaSet (or, with none active, the newest) takes the whole
// size; a saturated new ReplicaSet leaves the old ones at zero; otherwise,
// for a rolling update, the difference is spread in proportion over the
// active ReplicaSets.
func (c *controller) scale(
	ctx context.Context,
	d *appsv1.Deployment,
	newRS *appsv1.ReplicaSet,
	oldRSs []*appsv1.ReplicaSet,
) error {
	if target := activeOrLatest(newRS, oldRSs); target != nil {
		if replicasOf(target) == desiredOf(d) {
			return nil
		}
		_, _, err := c.scaleReplicaSet(ctx, target, desiredOf(d), d, false)
		return err
	}
	if saturated(d, newRS) {
		for _, old := range active(oldRSs) {
			if _, _, err := c.scaleReplicaSet(ctx, old, 0, d, false); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRolling(d) {
		return nil
	}
	sizes := proportionalSizes(d, active(append(oldRSs, newRS)))
	for _, s := range sizes {
		if _, _, err := c.scaleReplicaSet(ctx, s.rs, s.size, d, true); err != nil {
			return err
		}
	}
	return nil
}

// sized is a ReplicaSet and the size it is to have.
type sized struct {
	rs   *appsv1.ReplicaSet
	size int32
}

// proportionalSizes spreads the difference between d's allowed size
// (spec.replicas plus surge; 0 when scaled to zero) and the active
// ReplicaSets' sizes over them, in proportion to their sizes, from the
// largest down (newer first when growing, older first when shrinking);
// the rounding leftover goes to the first. It sorts activeRSs.
func proportionalSizes(d *appsv1.Deployment, activeRSs []*appsv1.ReplicaSet) []sized {
	allowed := int32(0)
	if desiredOf(d) > 0 {
		allowed = desiredOf(d) + maxSurge(d)
	}
	toAdd := allowed - specReplicas(activeRSs)
	switch {
	case toAdd > 0:
		sortStable(activeRSs, biggerNewerFirst)
	case toAdd < 0:
		sortStable(activeRSs, biggerOlderFirst)
	}
	out := make([]sized, len(activeRSs))
	added := int32(0)
	for i, rs := range activeRSs {
		out[i] = sized{rs: rs, size: replicasOf(rs)}
		if toAdd != 0 {
			p := share(rs, d, toAdd, added)
			out[i].size += p
			added += p
		}
	}
	if len(out) > 0 && toAdd != 0 {
		out[0].size = max(out[0].size+toAdd-added, 0)
	}
	return out
}

// activeOrLatest returns the only active ReplicaSet, or the newest one when
// none is active (the new one if it exists); nil when several are active.
// It sorts oldRSs newest first.
func activeOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(oldRSs) == 0 {
		return nil
	}
	sortStable(oldRSs, func(a, b *appsv1.ReplicaSet) int { return olderFirst(b, a) })
	all := active(append(oldRSs, newRS))
	switch len(all) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return oldRSs[0]
	case 1:
		return all[0]
	}
	return nil
}

// scaleReplicaSet sets rs's size to size (and its replica annotations to
// d's current values). Unless force is set, nothing is written when the
// size is right already. It reports whether the size changed, and returns
// the ReplicaSet as written.
func (c *controller) scaleReplicaSet(
	ctx context.Context,
	rs *appsv1.ReplicaSet,
	size int32,
	d *appsv1.Deployment,
	force bool,
) (bool, *appsv1.ReplicaSet, error) {
	cur := replicasOf(rs)
	if !force && cur == size {
		return false, rs, nil
	}
	desired, ceiling := desiredOf(d), desiredOf(d)+maxSurge(d)
	resize := cur != size
	if !resize && !replicasAnnotationsStale(rs, desired, ceiling) {
		return false, rs, nil
	}
	cp := rs.DeepCopy()
	cp.Spec.Replicas = &size
	setReplicasAnnotations(cp, desired, ceiling)
	updated, err := c.writeReplicaSet(ctx, d, cp)
	if err != nil {
		return false, nil, err
	}
	if resize {
		dir := "down"
		if cur < size {
			dir = "up"
		}
		c.recorder.Eventf(
			d,
			corev1.EventTypeNormal,
			eventScalingReplicaSet,
			"Scaled %s replica set %s from %d to %d",
			dir,
			updated.Name,
			cur,
			size,
		)
	}
	return resize, updated, nil
}

// cleanup deletes the oldest old ReplicaSets beyond revisionHistoryLimit,
// skipping any that still has pods, wants pods, has a spec change its
// controller has not observed, or is being deleted.
func (c *controller) cleanup(
	ctx context.Context,
	oldRSs []*appsv1.ReplicaSet,
	d *appsv1.Deployment,
) error {
	if !hasHistoryLimit(d) {
		return nil
	}
	var alive []*appsv1.ReplicaSet
	for _, rs := range oldRSs {
		if rs != nil && rs.DeletionTimestamp == nil {
			alive = append(alive, rs)
		}
	}
	excess := len(alive) - int(*d.Spec.RevisionHistoryLimit)
	if excess <= 0 {
		return nil
	}
	sortStable(alive, byRevision)
	log := logr.FromContextOrDiscard(ctx)
	for _, rs := range alive[:excess] {
		if rs.Status.Replicas != 0 || replicasOf(rs) != 0 ||
			rs.Generation > rs.Status.ObservedGeneration ||
			rs.DeletionTimestamp != nil {
			continue
		}
		log.V(4).
			Info("Deleting an old ReplicaSet beyond the revision history limit", "replicaSet", rs.Name)
		err := c.client.AppsV1().
			ReplicaSets(rs.Namespace).
			Delete(ctx, rs.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err // stop here rather than flood the API server
		}
	}
	return nil
}

// syncStatus writes the status calculated from the ReplicaSets, if it
// changed.
func (c *controller) syncStatus(
	ctx context.Context,
	allRSs []*appsv1.ReplicaSet,
	newRS *appsv1.ReplicaSet,
	d *appsv1.Deployment,
) error {
	st := c.calculateStatus(allRSs, newRS, d)
	if equality.Semantic.DeepEqual(d.Status, st) {
		return nil
	}
	d.Status = st
	return c.writeStatus(ctx, d)
}

// calculateStatus is d's status from its ReplicaSets: counts, the
// Available condition; other conditions are carried over.
func (c *controller) calculateStatus(
	allRSs []*appsv1.ReplicaSet,
	newRS *appsv1.ReplicaSet,
	d *appsv1.Deployment,
) appsv1.DeploymentStatus {
	available := sumStatus(allRSs, statusAvailable)
	unavailable := max(specReplicas(allRSs)-available, 0)
	st := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            sumStatus(allRSs, statusReplicas),
		UpdatedReplicas:     sumStatus([]*appsv1.ReplicaSet{newRS}, statusReplicas),
		ReadyReplicas:       sumStatus(allRSs, statusReady),
		AvailableReplicas:   available,
		UnavailableReplicas: unavailable,
		CollisionCount:      d.Status.CollisionCount,
	}
	if c.terminating {
		st.TerminatingReplicas = terminatingReplicas(allRSs)
	}
	st.Conditions = append(st.Conditions, d.Status.Conditions...)
	now := c.clock.Now()
	if available >= desiredOf(d)-maxUnavailable(d) {
		setCondition(
			&st,
			newCondition(
				appsv1.DeploymentAvailable,
				corev1.ConditionTrue,
				reasonMinimumAvailable,
				"Deployment has minimum availability.",
				now,
			),
		)
	} else {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse,
			reasonMinimumUnavailable, "Deployment does not have minimum availability.", now))
	}
	return st
}
