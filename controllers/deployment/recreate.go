package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// rolloutRecreate takes one step of a Recreate rollout: scale every old
// ReplicaSet to zero, wait until none of their pods is left running, then
// create (or grow) the new ReplicaSet to spec.replicas.
func (c *controller) rolloutRecreate(
	ctx context.Context,
	d *appsv1.Deployment,
	rsList []*appsv1.ReplicaSet,
	pods map[types.UID][]*corev1.Pod,
) error {
	newRS, oldRSs, err := c.replicaSetsAndRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	allRSs := append(oldRSs, newRS)

	scaledDown, err := c.scaleDownOldForRecreate(ctx, active(oldRSs), d)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	if oldPodsRunning(newRS, oldRSs, pods) {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	if newRS == nil {
		newRS, oldRSs, err = c.replicaSetsAndRevision(ctx, d, rsList, true)
		if err != nil {
			return err
		}
		allRSs = append(oldRSs, newRS)
	}
	if _, _, err := c.scaleReplicaSet(ctx, newRS, desiredOf(d), d, false); err != nil {
		return err
	}
	if complete(d, &d.Status) {
		if err := c.cleanup(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, allRSs, newRS, d)
}

// scaleDownOldForRecreate scales the given ReplicaSets to zero and reports
// whether any size changed.
func (c *controller) scaleDownOldForRecreate(
	ctx context.Context,
	oldRSs []*appsv1.ReplicaSet,
	d *appsv1.Deployment,
) (bool, error) {
	scaled := false
	for _, rs := range oldRSs {
		if replicasOf(rs) == 0 {
			continue
		}
		did, _, err := c.scaleReplicaSet(ctx, rs, 0, d, false)
		if err != nil {
			return false, err
		}
		scaled = scaled || did
	}
	return scaled, nil
}

// oldPodsRunning: an old ReplicaSet still reports pods, or a pod of a
// ReplicaSet other than the new one has not terminated (Succeeded or
// Failed).
func oldPodsRunning(
	newRS *appsv1.ReplicaSet,
	oldRSs []*appsv1.ReplicaSet,
	pods map[types.UID][]*corev1.Pod,
) bool {
	if sumStatus(oldRSs, statusReplicas) > 0 {
		return true
	}
	for uid, list := range pods {
		if newRS != nil && newRS.UID == uid {
			continue
		}
		for _, p := range list {
			if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
				return true
			}
		}
	}
	return false
}
