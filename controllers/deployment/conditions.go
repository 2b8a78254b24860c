package deployment

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons, as KCM sets them.
const (
	// Progressing.
	reasonReplicaSetUpdated   = "ReplicaSetUpdated"
	reasonReplicaSetCreateErr = "ReplicaSetCreateError"
	reasonNewReplicaSet       = "NewReplicaSetCreated"
	reasonFoundNewReplicaSet  = "FoundNewReplicaSet"
	reasonNewRSAvailable      = "NewReplicaSetAvailable"
	reasonTimedOut            = "ProgressDeadlineExceeded"
	reasonPaused              = "DeploymentPaused"
	reasonResumed             = "DeploymentResumed"
	// Available.
	reasonMinimumAvailable   = "MinimumReplicasAvailable"
	reasonMinimumUnavailable = "MinimumReplicasUnavailable"
)

// Event reasons, as KCM records them.
const (
	eventScalingReplicaSet = "ScalingReplicaSet"
	eventSelectingAll      = "SelectingAll"
	// eventReplicaSetCreateError shares its text with the condition reason.
	eventReplicaSetCreateError = reasonReplicaSetCreateErr
	// Rollbacks requested through the deprecated rollback annotation.
	eventRollbackDone              = "DeploymentRollback"
	eventRollbackRevisionNotFound  = "DeploymentRollbackRevisionNotFound"
	eventRollbackTemplateUnchanged = "DeploymentRollbackTemplateUnchanged"
)

func newCondition(
	t appsv1.DeploymentConditionType,
	status corev1.ConditionStatus,
	reason, message string,
	now time.Time,
) appsv1.DeploymentCondition {
	ts := metav1.NewTime(now)
	return appsv1.DeploymentCondition{
		Type:               t,
		Status:             status,
		LastUpdateTime:     ts,
		LastTransitionTime: ts,
		Reason:             reason,
		Message:            message,
	}
}

// getCondition returns a copy of the condition of type t, or nil.
func getCondition(
	st appsv1.DeploymentStatus,
	t appsv1.DeploymentConditionType,
) *appsv1.DeploymentCondition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return &c
		}
	}
	return nil
}

// setCondition puts c into st, unless a condition of its type with the same
// status and reason is there (then nothing changes, not even times). A
// condition whose status stays keeps its lastTransitionTime. The new
// condition goes last.
func setCondition(st *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := getCondition(*st, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	st.Conditions = append(withoutCondition(st.Conditions, c.Type), c)
}

func removeCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	st.Conditions = withoutCondition(st.Conditions, t)
}

func withoutCondition(
	cs []appsv1.DeploymentCondition,
	t appsv1.DeploymentConditionType,
) []appsv1.DeploymentCondition {
	var out []appsv1.DeploymentCondition
	for _, c := range cs {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}

// fromReplicaSetCondition carries a ReplicaSet's condition (ReplicaFailure)
// over to its Deployment.
func fromReplicaSetCondition(c appsv1.ReplicaSetCondition) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{
		Type:               appsv1.DeploymentConditionType(c.Type),
		Status:             c.Status,
		LastTransitionTime: c.LastTransitionTime,
		LastUpdateTime:     c.LastTransitionTime,
		Reason:             c.Reason,
		Message:            c.Message,
	}
}

// complete: every desired replica is updated and available, no old pod is
// left, and the status is of the current generation.
func complete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	want := desiredOf(d)
	return st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want &&
		st.ObservedGeneration >= d.Generation
}

// progressing: compared with d's current status, st has more updated,
// ready or available pods, or fewer old ones.
func progressing(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	old := d.Status
	return st.UpdatedReplicas > old.UpdatedReplicas ||
		st.Replicas-st.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		st.ReadyReplicas > old.ReadyReplicas ||
		st.AvailableReplicas > old.AvailableReplicas
}

// timedOut: the Progressing condition in st last moved more than
// progressDeadlineSeconds before now, or already says so. A Progressing
// condition of a finished rollout never times out.
func timedOut(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	c := getCondition(*st, appsv1.DeploymentProgressing)
	switch {
	case c == nil || c.Reason == reasonNewRSAvailable:
		return false
	case c.Reason == reasonTimedOut:
		return true
	}
	deadline := c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
	return deadline.Before(now)
}
