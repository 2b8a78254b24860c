package statefulset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
)

// maxBatch caps the pods one slow-start batch writes at once (KCM's).
const maxBatch = 500

// update runs one sync of set over its claimed pods at now: revisions,
// pods, status, then the history limit. It returns the status written.
func (c *controller) update(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod,
	now time.Time) (*appsv1.StatefulSetStatus, error) {
	set = set.DeepCopy()
	revs, err := c.listRevisions(set)
	if err != nil {
		return nil, err
	}
	sortRevisions(revs)
	cur, upd, status, err := c.performUpdate(ctx, set, pods, revs, now)
	herr := c.truncateHistory(ctx, set, pods, revs, cur, upd)
	if err != nil {
		return nil, errors.Join(err, herr)
	}
	return status, herr
}

// listRevisions returns the namespace's revisions that set's selector
// matches and that set controls or nobody does.
func (c *controller) listRevisions(set *appsv1.StatefulSet) ([]*appsv1.ControllerRevision, error) {
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil, err
	}
	all, err := c.revLister.ControllerRevisions(set.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	var out []*appsv1.ControllerRevision
	for _, r := range all {
		if ref := metav1.GetControllerOfNoCopy(r); ref == nil || ref.UID == set.UID {
			out = append(out, r)
		}
	}
	return out, nil
}

func (c *controller) performUpdate(ctx context.Context, set *appsv1.StatefulSet,
	pods []*corev1.Pod, revs []*appsv1.ControllerRevision,
	now time.Time) (cur, upd *appsv1.ControllerRevision, st *appsv1.StatefulSetStatus, err error) {
	log := logr.FromContextOrDiscard(ctx)
	cur, upd, collisions, err := c.revisions(ctx, set, revs)
	if err != nil {
		return cur, upd, nil, err
	}
	st, err = c.updatePods(ctx, set, cur, upd, collisions, pods, now)
	if err != nil && st == nil {
		return cur, upd, nil, err
	}
	serr := c.writeStatus(ctx, set, st)
	if serr == nil {
		log.V(4).Info("Updated status", "statefulSet", keyOf(set), "replicas", st.Replicas,
			"readyReplicas", st.ReadyReplicas, "currentReplicas", st.CurrentReplicas,
			"updatedReplicas", st.UpdatedReplicas)
	}
	switch {
	case err != nil && serr != nil:
		log.Error(serr, "Could not update status", "statefulSet", keyOf(set))
		return cur, upd, st, err
	case err != nil:
		return cur, upd, st, err
	case serr != nil:
		return cur, upd, st, serr
	}
	return cur, upd, st, nil
}

// countStatus recounts the replica fields of st over the pod lists.
func countStatus(st *appsv1.StatefulSetStatus, minReady int32, cur, upd *appsv1.ControllerRevision,
	now time.Time, lists ...[]*corev1.Pod) {
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas = 0, 0, 0
	st.CurrentReplicas, st.UpdatedReplicas = 0, 0
	for _, l := range lists {
		for _, p := range l {
			if isCreated(p) {
				st.Replicas++
			}
			if isRunningAndReady(p) {
				st.ReadyReplicas++
				if isAvailable(p, minReady, now) {
					st.AvailableReplicas++
				}
			}
			if isCreated(p) && !isTerminating(p) {
				rev := podRevision(p)
				if rev == cur.Name {
					st.CurrentReplicas++
				}
				if rev == upd.Name {
					st.UpdatedReplicas++
				}
			}
		}
	}
}

// slowStart runs fn over 0..n-1 in batches of 1, 2, 4, … (at most
// maxBatch), stopping after a batch with an error.
func slowStart(n int, fn func(int) (bool, error)) error {
	next := 0
	for size := min(n, 1); size > 0; size = min(2*size, n, maxBatch) {
		errs := make([]error, size)
		var wg sync.WaitGroup
		for i := range size {
			k := next + i
			wg.Go(func() {
				if _, err := fn(k); err != nil {
					errs[i] = err
				}
			})
		}
		wg.Wait()
		next += size
		n -= size
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}

// forAll runs fn over pods: in order, stopping at the first that says
// stop or fails, when monotonic; in slow-start batches otherwise.
func forAll(pods []*corev1.Pod, fn func(int) (bool, error), monotonic bool) (bool, error) {
	if monotonic {
		for i := range pods {
			if stop, err := fn(i); stop || err != nil {
				return true, err
			}
		}
		return false, nil
	}
	if err := slowStart(len(pods), fn); err != nil {
		return true, err
	}
	return false, nil
}

// updatePods creates, updates and deletes set's pods towards its spec, as
// KCM's updateStatefulSet does, and returns the status to record.
func (c *controller) updatePods(ctx context.Context, set *appsv1.StatefulSet,
	cur, upd *appsv1.ControllerRevision, collisions int32, pods []*corev1.Pod,
	now time.Time) (*appsv1.StatefulSetStatus, error) {
	log := logr.FromContextOrDiscard(ctx)
	curSet, err := applyRevision(set, cur)
	if err != nil {
		return nil, err
	}
	updSet, err := applyRevision(set, upd)
	if err != nil {
		return nil, err
	}
	recreate := set.Spec.UpdateStrategy.Type == appsv1.RecreateStatefulSetStrategyType
	if recreate && !c.recreate {
		err := fmt.Errorf("statefulset %s/%s uses Recreate strategy but feature gate %s "+
			"is disabled",
			set.Namespace, set.Name, "StatefulSetRecreateStrategy")
		c.recorder.Event(set, corev1.EventTypeWarning, "UnknownStrategy", err.Error())
		return nil, err
	}
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: set.Generation,
		CurrentRevision:    cur.Name,
		UpdateRevision:     upd.Name,
		CollisionCount:     &collisions,
	}
	st.Conditions = append(st.Conditions, set.Status.Conditions...)
	minReady := set.Spec.MinReadySeconds
	countStatus(&st, minReady, cur, upd, now, pods)

	n := replicasOf(set)
	start := startOrdinal(set)
	replicas := make([]*corev1.Pod, n)
	condemned := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		switch {
		case inOrdinalRange(p, set):
			replicas[ordinalOf(p)-start] = p
		case ordinalOf(p) >= 0:
			condemned = append(condemned, p)
		}
	}
	for ord := start; ord <= endOrdinal(set); ord++ {
		if replicas[ord-start] == nil {
			p, err := newVersionedPod(curSet, updSet, cur.Name, upd.Name, ord)
			if err != nil {
				return nil, err
			}
			replicas[ord-start] = p
		}
	}
	sort.SliceStable(condemned, func(i, j int) bool {
		return ordinalOf(condemned[i]) > ordinalOf(condemned[j])
	})
	var firstUnavailable *corev1.Pod
	unavailable := 0
	for _, p := range replicas {
		if isUnavailable(p, minReady, now) {
			unavailable++
			if firstUnavailable == nil {
				firstUnavailable = p
			}
		}
	}
	for i := len(condemned) - 1; i >= 0; i-- {
		if isUnavailable(condemned[i], minReady, now) {
			unavailable++
			if firstUnavailable == nil {
				firstUnavailable = condemned[i]
			}
		}
	}
	if unavailable > 0 {
		log.V(4).Info("StatefulSet has unavailable Pods", "statefulSet", keyOf(set),
			"unavailableReplicas", unavailable, "pod", firstUnavailable.Name)
	}
	if set.DeletionTimestamp != nil {
		return &st, nil
	}
	monotonic := !parallel(set)
	recount := func() { countStatus(&st, minReady, cur, upd, now, replicas, condemned) }
	if recreate {
		gone, err := c.recreateDeleteAndWait(ctx, set, upd, replicas, condemned, &st)
		if err != nil || !gone {
			recount()
			return &st, err
		}
		if cur.Name != upd.Name {
			c.setProgressing(&st, corev1.ConditionTrue, reasonRecreateInProgress,
				"Waiting for new-revision pods to be created")
		}
	}

	if stop, err := forAll(replicas, func(i int) (bool, error) {
		return c.processReplica(ctx, set, updSet, monotonic, replicas, i, now)
	}, monotonic); stop || err != nil {
		recount()
		return &st, err
	}
	if stop, err := forAll(condemned, func(i int) (bool, error) {
		match, err := c.claimsMatchRetention(updSet, condemned[i])
		if err != nil {
			return true, err
		}
		if !match {
			if err := c.updateClaimsForRetention(ctx, updSet, condemned[i]); err != nil {
				return true, err
			}
		}
		return false, nil
	}, monotonic); stop || err != nil {
		recount()
		return &st, err
	}
	if stop, err := forAll(condemned, func(i int) (bool, error) {
		return c.processCondemned(ctx, set, firstUnavailable, monotonic, condemned, i, now)
	}, monotonic); stop || err != nil {
		recount()
		return &st, err
	}
	recount()
	if set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType || recreate {
		return &st, nil
	}
	if c.maxUnavailable {
		return c.rollWithBudget(ctx, set, replicas, upd, st, now)
	}
	updateMin := 0
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		updateMin = int(partitionOf(ru))
	}
	for target := len(replicas) - 1; target >= updateMin; target-- {
		p := replicas[target]
		if podRevision(p) != upd.Name && !isTerminating(p) {
			log.V(2).Info("Pod of StatefulSet is terminating for update",
				"statefulSet", keyOf(set), "pod", p.Name)
			if err := c.deletePod(ctx, set, p); err != nil {
				return &st, err
			}
			st.CurrentReplicas--
			return &st, nil
		}
		if isUnavailable(p, minReady, now) {
			log.V(4).Info("StatefulSet is waiting for Pod to update",
				"statefulSet", keyOf(set), "pod", p.Name)
			return &st, nil
		}
	}
	return &st, nil
}

// processReplica brings replica i to life and to its identity; true
// stops a monotonic pass.
func (c *controller) processReplica(ctx context.Context, set, updSet *appsv1.StatefulSet,
	monotonic bool, replicas []*corev1.Pod, i int, now time.Time) (bool, error) {
	log := logr.FromContextOrDiscard(ctx)
	p := replicas[i]
	if isTerminal(p) {
		// Failed or succeeded (evicted, node rebooted): replaced once gone.
		if p.DeletionTimestamp == nil {
			if err := c.deletePod(ctx, set, p); err != nil {
				return true, err
			}
		}
		return true, nil
	}
	if !isCreated(p) {
		stale, err := c.claimIsStale(set, p)
		if err != nil || stale {
			return true, err
		}
		if err := c.createPod(ctx, set, p); err != nil {
			return true, err
		}
		if monotonic {
			return true, nil
		}
	}
	if isPending(p) {
		log.V(4).Info("StatefulSet is triggering PVC creation for pending Pod",
			"statefulSet", keyOf(set), "pod", p.Name)
		if err := c.createMissingClaims(ctx, set, p); err != nil {
			return true, err
		}
	}
	if isTerminating(p) && monotonic {
		log.V(4).Info("StatefulSet is waiting for Pod to Terminate",
			"statefulSet", keyOf(set), "pod", p.Name)
		return true, nil
	}
	if !isRunningAndReady(p) && monotonic {
		log.V(4).Info("StatefulSet is waiting for Pod to be Running and Ready",
			"statefulSet", keyOf(set), "pod", p.Name)
		return true, nil
	}
	if !isAvailable(p, set.Spec.MinReadySeconds, now) && monotonic {
		log.V(4).Info("StatefulSet is waiting for Pod to be Available",
			"statefulSet", keyOf(set), "pod", p.Name)
		return true, nil
	}
	match, err := c.claimsMatchRetention(updSet, p)
	if err != nil {
		match = true
	}
	if identityMatches(set, p) && storageMatches(set, p) && match {
		return false, nil
	}
	if err := c.updatePod(ctx, updSet, p); err != nil {
		return true, err
	}
	return false, nil
}

// processCondemned deletes condemned pod i, in a monotonic pass only once
// it (or the first unavailable pod, which it then is) may go.
func (c *controller) processCondemned(ctx context.Context, set *appsv1.StatefulSet,
	firstUnavailable *corev1.Pod, monotonic bool, condemned []*corev1.Pod, i int,
	now time.Time) (bool, error) {
	log := logr.FromContextOrDiscard(ctx)
	p := condemned[i]
	if isTerminating(p) {
		if monotonic {
			log.V(4).Info("StatefulSet is waiting for Pod to Terminate prior to scale down",
				"statefulSet", keyOf(set), "pod", p.Name)
			return true, nil
		}
		return false, nil
	}
	if monotonic && p != firstUnavailable &&
		(!isRunningAndReady(p) || !isAvailable(p, set.Spec.MinReadySeconds, now)) {
		log.V(4).Info("StatefulSet is waiting for Pod to be Available prior to scale down",
			"statefulSet", keyOf(set), "pod", firstUnavailable.Name)
		return true, nil
	}
	log.V(2).Info("Pod of StatefulSet is terminating for scale down",
		"statefulSet", keyOf(set), "pod", p.Name)
	return true, c.deletePod(ctx, set, p)
}

// maxUnavailableOf is rollingUpdate.maxUnavailable scaled to replicas
// (rounded down), at least 1; 1 when unset.
func maxUnavailableOf(v *intstr.IntOrString, replicas int) (int, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(
		intstr.ValueOrDefault(v, intstr.FromInt32(1)), replicas, false)
	if err != nil {
		return 0, err
	}
	return max(n, 1), nil
}

// rollWithBudget is the rolling update under MaxUnavailableStatefulSet:
// from the highest ordinal down to the partition, delete outdated pods
// while fewer than maxUnavailable pods are unavailable (Parallel: the
// outdated unavailable ones first, then available ones within the budget).
func (c *controller) rollWithBudget(ctx context.Context, set *appsv1.StatefulSet,
	replicas []*corev1.Pod, upd *appsv1.ControllerRevision, st appsv1.StatefulSetStatus,
	now time.Time) (*appsv1.StatefulSetStatus, error) {
	log := logr.FromContextOrDiscard(ctx)
	minReady := set.Spec.MinReadySeconds
	updateMin, budget := 0, 1
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		updateMin = int(partitionOf(ru))
		var err error
		if budget, err = maxUnavailableOf(ru.MaxUnavailable, replicasOf(set)); err != nil {
			return &st, err
		}
	}
	outdated := func(p *corev1.Pod) bool { return podRevision(p) != upd.Name }
	unavailable, unavailableOutdated := 0, 0
	for t := len(replicas) - 1; t >= 0; t-- {
		p := replicas[t]
		if isUnavailable(p, minReady, now) {
			unavailable++
			if parallel(set) && outdated(p) && !isTerminating(p) {
				unavailableOutdated++
			}
		}
	}
	if unavailable >= budget && unavailableOutdated == 0 {
		if unavailable > budget {
			log.V(4).Info("StatefulSet found unavailablePods, more than the allowed maxUnavailable",
				"statefulSet", keyOf(set), "unavailablePods", unavailable, "maxUnavailable", budget)
		}
		return &st, nil
	}
	del := func(p *corev1.Pod) error {
		log.V(2).Info("StatefulSet terminating Pod for update", "statefulSet", keyOf(set),
			"pod", p.Name)
		if err := c.deletePod(ctx, set, p); err != nil {
			return err
		}
		st.CurrentReplicas--
		return nil
	}
	if parallel(set) {
		for t := len(replicas) - 1; t >= updateMin; t-- {
			p := replicas[t]
			if outdated(p) && !isAvailable(p, minReady, now) && !isTerminating(p) {
				if err := del(p); err != nil {
					return &st, err
				}
			}
		}
		left := budget - unavailable
		for t := len(replicas) - 1; t >= updateMin && left > 0; t-- {
			p := replicas[t]
			if outdated(p) && !isUnavailable(p, minReady, now) {
				if err := del(p); err != nil {
					return &st, err
				}
				left--
			}
		}
		return &st, nil
	}
	left := budget - unavailable
	for t := len(replicas) - 1; t >= updateMin && left > 0; t-- {
		p := replicas[t]
		if outdated(p) && !isTerminating(p) {
			if err := del(p); err != nil {
				return &st, err
			}
			left--
		}
	}
	return &st, nil
}

// writeStatus completes a finished update in st and writes it when it
// differs from set's.
func (c *controller) writeStatus(ctx context.Context, set *appsv1.StatefulSet,
	st *appsv1.StatefulSetStatus) error {
	n := int32(replicasOf(set))
	if st.UpdatedReplicas == n && st.ReadyReplicas == n && st.Replicas == n {
		st.CurrentReplicas = st.UpdatedReplicas
		st.CurrentRevision = st.UpdateRevision
		if progressing(st) != nil && c.recreate &&
			set.Spec.UpdateStrategy.Type == appsv1.RecreateStatefulSetStrategyType {
			c.setProgressing(st, corev1.ConditionFalse, reasonRecreateCompleted,
				"All pods recreated successfully")
		}
	}
	if c.maxUnavailable {
		if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			if _, err := maxUnavailableOf(ru.MaxUnavailable, int(n)); err != nil {
				return err
			}
		}
	}
	if !statusChanged(set, st) {
		return nil
	}
	s := set.DeepCopy()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s.Status = *st
		updated, err := c.client.AppsV1().StatefulSets(s.Namespace).UpdateStatus(ctx, s,
			metav1.UpdateOptions{})
		if err == nil {
			c.wrote(updated, updated)
			return nil
		}
		if fresh, gerr := c.setLister.StatefulSets(s.Namespace).Get(s.Name); gerr == nil {
			s = fresh.DeepCopy()
		}
		return err
	})
}

// statusChanged: KCM's test of whether the status needs writing (the
// collision count alone does not).
func statusChanged(set *appsv1.StatefulSet, st *appsv1.StatefulSetStatus) bool {
	o := &set.Status
	return st.ObservedGeneration > o.ObservedGeneration || st.Replicas != o.Replicas ||
		st.CurrentReplicas != o.CurrentReplicas || st.ReadyReplicas != o.ReadyReplicas ||
		st.UpdatedReplicas != o.UpdatedReplicas || st.CurrentRevision != o.CurrentRevision ||
		st.AvailableReplicas != o.AvailableReplicas || st.UpdateRevision != o.UpdateRevision ||
		!equality.Semantic.DeepEqual(o.Conditions, st.Conditions) &&
			!(len(o.Conditions) == 0 && len(st.Conditions) == 0)
}

// Reasons of the Progressing condition under the Recreate strategy.
const (
	reasonRecreateInProgress = "RecreateInProgress"
	reasonRecreateCompleted  = "RecreateCompleted"
)

// recreateDeleteAndWait deletes every created pod not at the update
// revision (Recreate), in slow-start batches, and reports whether none is
// left, terminating ones included; while some are, the Progressing
// condition says so.
func (c *controller) recreateDeleteAndWait(ctx context.Context, set *appsv1.StatefulSet,
	upd *appsv1.ControllerRevision, replicas, condemned []*corev1.Pod,
	st *appsv1.StatefulSetStatus) (bool, error) {
	all := slices.Concat(replicas, condemned)
	var inProgress atomic.Bool
	if _, err := forAll(all, func(i int) (bool, error) {
		p := all[i]
		if p == nil || !isCreated(p) || podRevision(p) == upd.Name {
			return false, nil
		}
		inProgress.Store(true)
		if isTerminating(p) {
			return false, nil
		}
		logr.FromContextOrDiscard(ctx).V(4).Info("Recreate: deleting old revision pod",
			"statefulSet", keyOf(set), "pod", p.Name)
		return true, c.deletePod(ctx, set, p)
	}, false); err != nil {
		return false, err
	}
	if inProgress.Load() {
		c.setProgressing(st, corev1.ConditionTrue, reasonRecreateInProgress,
			"Deleting old revision pods")
		return false, nil
	}
	return true, nil
}

func progressing(st *appsv1.StatefulSetStatus) *appsv1.StatefulSetCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == appsv1.StatefulSetProgressing {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setProgressing sets the Progressing condition; its transition time
// moves only when its status changes.
func (c *controller) setProgressing(st *appsv1.StatefulSetStatus, status corev1.ConditionStatus,
	reason, message string) {
	cond := progressing(st)
	if cond == nil {
		st.Conditions = append(st.Conditions, appsv1.StatefulSetCondition{
			Type: appsv1.StatefulSetProgressing, Status: status, Reason: reason,
			Message: message, LastTransitionTime: metav1.NewTime(c.clock.Now())})
		return
	}
	if cond.Status == status && cond.Reason == reason && cond.Message == message {
		return
	}
	if cond.Status != status {
		cond.LastTransitionTime = metav1.NewTime(c.clock.Now())
	}
	cond.Status, cond.Reason, cond.Message = status, reason, message
}
