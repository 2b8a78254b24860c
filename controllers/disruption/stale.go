package disruption

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/tools/cache"
)

// staleDisruption reports whether pod carries a DisruptionTarget condition
// that may go stale: True, set by someone other than the kubelet, on a pod
// that is neither being deleted nor terminal. after is how long until it
// is stale (zero: it is).
func (c *controller) staleDisruption(pod *corev1.Pod) (bool, time.Duration) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded ||
		pod.Status.Phase == corev1.PodFailed {
		return false, 0
	}
	cond := disruptionTarget(pod)
	if cond == nil || cond.Status != corev1.ConditionTrue ||
		cond.Reason == corev1.PodReasonTerminationByKubelet {
		return false, 0
	}
	return true, max(c.staleTimeout-c.clock.Since(cond.LastTransitionTime.Time), 0)
}

func disruptionTarget(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.DisruptionTarget {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// syncStalePod resets a stale DisruptionTarget condition to False (reason
// and message cleared, as KCM writes it), or schedules the pod for when it
// becomes stale.
func (c *controller) syncStalePod(ctx context.Context, k string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(k)
	if err != nil {
		return err
	}
	pod, err := c.pods.Pods(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	stale, after := c.staleDisruption(pod)
	if !stale {
		return nil
	}
	if after > 0 {
		c.staleLater(k, after)
		return nil
	}
	status := pod.Status.DeepCopy()
	i := slices.IndexFunc(status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.DisruptionTarget
	})
	// Status changes True to False: the transition time is now.
	status.Conditions[i] = corev1.PodCondition{Type: corev1.DisruptionTarget,
		Status: corev1.ConditionFalse, ObservedGeneration: pod.Generation,
		LastTransitionTime: metav1.NewTime(c.clock.Now())}
	patch, err := conditionsPatch(pod.UID, pod.Status, *status)
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{}, "status")
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("resetting the stale DisruptionTarget condition of pod %s: %w", k, err)
	}
	c.log.V(2).Info("Reset stale DisruptionTarget condition to False", "pod", k)
	return nil
}

// conditionsPatch is the strategic merge patch from old's conditions to
// updated's, with the pod's UID as precondition. It carries the conditions
// only: the cache holds a pruned pod, and a whole-status write would clear
// what it dropped.
func conditionsPatch(uid types.UID, old, updated corev1.PodStatus) ([]byte, error) {
	before, err := json.Marshal(corev1.Pod{
		Status: corev1.PodStatus{Conditions: old.Conditions}})
	if err != nil {
		return nil, err
	}
	after, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid},
		Status: corev1.PodStatus{Conditions: updated.Conditions}})
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(before, after, corev1.Pod{})
}
