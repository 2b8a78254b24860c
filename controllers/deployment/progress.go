package deployment

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// syncRolloutStatus writes the status of a rollout step with its
// Progressing condition (NewReplicaSetAvailable, ReplicaSetUpdated or
// ProgressDeadlineExceeded) and any ReplicaFailure of the ReplicaSets. When
// nothing changed it schedules the deadline check.
func (c *controller) syncRolloutStatus(
	ctx context.Context,
	allRSs []*appsv1.ReplicaSet,
	newRS *appsv1.ReplicaSet,
	d *appsv1.Deployment,
) error {
	st := c.calculateStatus(allRSs, newRS, d)
	if !hasProgressDeadline(d) {
		removeCondition(&st, appsv1.DeploymentProgressing)
	}
	now := c.clock.Now()
	cur := getCondition(d.Status, appsv1.DeploymentProgressing)
	finished := st.Replicas == st.UpdatedReplicas && cur != nil &&
		cur.Reason == reasonNewRSAvailable
	if hasProgressDeadline(d) && !finished {
		subject := fmt.Sprintf("Deployment %q", d.Name)
		if newRS != nil {
			subject = fmt.Sprintf("ReplicaSet %q", newRS.Name)
		}
		switch {
		case complete(d, &st):
			setCondition(
				&st,
				newCondition(
					appsv1.DeploymentProgressing,
					corev1.ConditionTrue,
					reasonNewRSAvailable,
					subject+" has successfully progressed.",
					now,
				),
			)
		case progressing(d, &st):
			cond := newCondition(
				appsv1.DeploymentProgressing,
				corev1.ConditionTrue,
				reasonReplicaSetUpdated,
				subject+" is progressing.",
				now,
			)
			// Progress refreshes lastUpdateTime even when status and
			// reason stay, so the condition is replaced, not merged.
			if cur != nil {
				if cur.Status == corev1.ConditionTrue {
					cond.LastTransitionTime = cur.LastTransitionTime
				}
				removeCondition(&st, appsv1.DeploymentProgressing)
			}
			setCondition(&st, cond)
		case timedOut(d, &st, now):
			setCondition(
				&st,
				newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonTimedOut,
					subject+" has timed out progressing.", now),
			)
		}
	}
	if failures := replicaFailures(allRSs, newRS); len(failures) > 0 {
		setCondition(&st, failures[0])
	} else {
		removeCondition(&st, appsv1.DeploymentReplicaFailure)
	}
	if equality.Semantic.DeepEqual(d.Status, st) {
		c.requeueStuck(ctx, d, st)
		return nil
	}
	d.Status = st
	return c.writeStatus(ctx, d)
}

// replicaFailures are the ReplicaFailure conditions of the new ReplicaSet,
// or, when it has none, of all ReplicaSets.
func replicaFailures(
	allRSs []*appsv1.ReplicaSet,
	newRS *appsv1.ReplicaSet,
) []appsv1.DeploymentCondition {
	collect := func(rss []*appsv1.ReplicaSet) []appsv1.DeploymentCondition {
		var out []appsv1.DeploymentCondition
		for _, rs := range rss {
			if rs == nil {
				continue
			}
			for _, cond := range rs.Status.Conditions {
				if cond.Type == appsv1.ReplicaSetReplicaFailure {
					out = append(out, fromReplicaSetCondition(cond))
				}
			}
		}
		return out
	}
	if out := collect([]*appsv1.ReplicaSet{newRS}); len(out) > 0 {
		return out
	}
	return collect(allRSs)
}

// requeueStuck schedules a sync for when d's progress deadline passes, if
// it has one, is rolling out and has not timed out yet; a deadline less
// than a second away is checked at once (rate-limited). It returns the
// delay, or -1 when nothing was scheduled.
func (c *controller) requeueStuck(
	ctx context.Context,
	d *appsv1.Deployment,
	st appsv1.DeploymentStatus,
) time.Duration {
	cur := getCondition(d.Status, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || cur == nil || complete(d, &st) || cur.Reason == reasonTimedOut {
		return -1
	}
	after := cur.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).
		Sub(c.clock.Now())
	log := logr.FromContextOrDiscard(ctx)
	if after < time.Second {
		log.V(4).Info("Checking progress now")
		c.enqueueRateLimited(keyOf(d))
		return 0
	}
	log.V(4).Info("Checking progress later", "after", after)
	c.enqueueAfter(keyOf(d), after+time.Second)
	return after
}
