// Package podstate answers what the built-ins ask of a pod: whether it is
// active, terminating, ready or available, as KCM's controllers decide it.
// One copy, so that the ReplicaSet, DaemonSet and Job controllers count
// pods alike.
package podstate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// IsActive: neither finished nor being deleted.
func IsActive(p *corev1.Pod) bool {
	return !finished(p) && p.DeletionTimestamp == nil
}

// IsTerminating: being deleted but not finished.
func IsTerminating(p *corev1.Pod) bool {
	return !finished(p) && p.DeletionTimestamp != nil
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// ReadyCondition is the pod's Ready condition, nil without one.
func ReadyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// IsReady: its Ready condition is True.
func IsReady(p *corev1.Pod) bool {
	c := ReadyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

// ReadyTime is when a ready pod became ready; zero if it is not ready.
func ReadyTime(p *corev1.Pod) time.Time {
	if c := ReadyCondition(p); c != nil && c.Status == corev1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// IsAvailable: ready for at least minReadySeconds at now (a ready pod with
// no transition time is available only when minReadySeconds is 0).
func IsAvailable(p *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	if !IsReady(p) {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	since := ReadyTime(p)
	return !since.IsZero() && !since.Add(time.Duration(minReadySeconds)*time.Second).After(now)
}
