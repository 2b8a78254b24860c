package replicaset

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/go-logr/logr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
)

// Reasons of the ReplicaFailure condition, as upstream sets them.
const (
	reasonFailedCreate = "FailedCreate"
	reasonFailedDelete = "FailedDelete"
)

// statusUpdateRetries is how many times a failed status update is retried
// after re-reading the object (upstream: 1).
const statusUpdateRetries = 1

// calculateStatus returns rs's new status given its claimed active pods, the
// number of its terminating pods (nil when not reported) and the error of
// managing replicas, evaluated at now. rs is not modified.
func calculateStatus(
	rs *appsv1.ReplicaSet,
	active []*corev1.Pod,
	terminating *int32,
	manageErr error,
	now time.Time,
) appsv1.ReplicaSetStatus {
	st := *rs.Status.DeepCopy()
	template := labels.SelectorFromValidatedSet(labels.Set(rs.Spec.Template.Labels))
	var fully, ready, available int32
	for _, p := range active {
		if template.Matches(labels.Set(p.Labels)) {
			fully++
		}
		if podstate.IsReady(p) {
			ready++
			if podstate.IsAvailable(p, rs.Spec.MinReadySeconds, now) {
				available++
			}
		}
	}

	failure := condition(st, appsv1.ReplicaSetReplicaFailure)
	switch {
	case manageErr != nil && failure == nil:
		reason := ""
		if diff := len(active) - int(replicasOf(rs)); diff < 0 {
			reason = reasonFailedCreate
		} else if diff > 0 {
			reason = reasonFailedDelete
		}
		st.Conditions = append(st.Conditions, appsv1.ReplicaSetCondition{
			Type:               appsv1.ReplicaSetReplicaFailure,
			Status:             corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now),
			Reason:             reason,
			Message:            manageErr.Error(),
		})
	case manageErr == nil && failure != nil:
		st.Conditions = withoutCondition(st.Conditions, appsv1.ReplicaSetReplicaFailure)
	}

	st.Replicas = int32(len(active))
	st.FullyLabeledReplicas = fully
	st.ReadyReplicas = ready
	st.AvailableReplicas = available
	st.TerminatingReplicas = terminating
	return st
}

func condition(
	st appsv1.ReplicaSetStatus,
	t appsv1.ReplicaSetConditionType,
) *appsv1.ReplicaSetCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func withoutCondition(
	cs []appsv1.ReplicaSetCondition,
	t appsv1.ReplicaSetConditionType,
) []appsv1.ReplicaSetCondition {
	var out []appsv1.ReplicaSetCondition
	for _, c := range cs {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}

// statusUnchanged reports whether writing st to rs would change nothing,
// observedGeneration included.
func statusUnchanged(rs *appsv1.ReplicaSet, st appsv1.ReplicaSetStatus) bool {
	cur := rs.Status
	return cur.Replicas == st.Replicas &&
		cur.FullyLabeledReplicas == st.FullyLabeledReplicas &&
		cur.ReadyReplicas == st.ReadyReplicas &&
		cur.AvailableReplicas == st.AvailableReplicas &&
		ptr.Equal(cur.TerminatingReplicas, st.TerminatingReplicas) &&
		rs.Generation == cur.ObservedGeneration &&
		equality.Semantic.DeepEqual(cur.Conditions, st.Conditions)
}

// updateStatus writes st (with observedGeneration set to rs's generation)
// unless nothing would change; on failure it re-reads the object and tries
// again, statusUpdateRetries times. rs must be a copy the caller owns. A
// write is recorded with the loop's staleness guard.
func (c *controller) updateStatus(
	ctx context.Context,
	rs *appsv1.ReplicaSet,
	st appsv1.ReplicaSetStatus,
) (*appsv1.ReplicaSet, error) {
	if statusUnchanged(rs, st) {
		return rs, nil
	}
	st.ObservedGeneration = rs.Generation
	log := logr.FromContextOrDiscard(ctx)
	for i := 0; ; i++ {
		if v := log.V(4); v.Enabled() {
			v.Info(
				"Updating status",
				"kind",
				c.kindName,
				"object",
				rs.Namespace+"/"+rs.Name,
				"replicas",
				st.Replicas,
				"want",
				replicasOf(rs),
				"fullyLabeled",
				st.FullyLabeledReplicas,
				"ready",
				st.ReadyReplicas,
				"available",
				st.AvailableReplicas,
				"terminating",
				st.TerminatingReplicas,
				"observedGeneration",
				st.ObservedGeneration,
			)
		}
		rs.Status = st
		updated, err := c.kind.updateStatus(ctx, rs)
		if err == nil {
			// Staleness guard (as KCM 1.36+): no sync of this object until
			// the informer has delivered this write, so the next sync never
			// computes from a status older than the one just written.
			c.loop.Wrote(rs.Namespace+"/"+rs.Name, updated)
			return updated, nil
		}
		if i >= statusUpdateRetries {
			return nil, err
		}
		fresh, getErr := c.kind.fresh(ctx, rs.Namespace, rs.Name)
		if getErr != nil {
			return nil, getErr
		}
		rs = fresh
	}
}

// replicasOf is spec.replicas, 1 when unset (the API default).
func replicasOf(rs *appsv1.ReplicaSet) int32 { return ptr.Deref(rs.Spec.Replicas, 1) }
