package deployment

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
)

// rolloutRolling takes one step of a rolling update: grow the new
// ReplicaSet within the surge, else shrink the old ones within the
// unavailability budget, else (when complete) clean up history; the status
// is written in every case.
func (c *controller) rolloutRolling(
	ctx context.Context,
	d *appsv1.Deployment,
	rsList []*appsv1.ReplicaSet,
) error {
	newRS, oldRSs, err := c.replicaSetsAndRevision(ctx, d, rsList, true)
	if err != nil {
		return err
	}
	allRSs := append(oldRSs, newRS)

	scaledUp, err := c.reconcileNew(ctx, allRSs, newRS, d)
	if err != nil {
		return err
	}
	if scaledUp {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	scaledDown, err := c.reconcileOld(ctx, allRSs, active(oldRSs), newRS, d)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}
	if complete(d, &d.Status) {
		if err := c.cleanup(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, allRSs, newRS, d)
}

// reconcileNew sizes the new ReplicaSet: down to spec.replicas if above,
// else up as far as the surge allows.
func (c *controller) reconcileNew(
	ctx context.Context,
	allRSs []*appsv1.ReplicaSet,
	newRS *appsv1.ReplicaSet,
	d *appsv1.Deployment,
) (bool, error) {
	want := desiredOf(d)
	switch cur := replicasOf(newRS); {
	case cur == want:
		return false, nil
	case cur > want:
		scaled, _, err := c.scaleReplicaSet(ctx, newRS, want, d, false)
		return scaled, err
	}
	size, err := newReplicaCount(d, allRSs, newRS)
	if err != nil {
		return false, err
	}
	scaled, _, err := c.scaleReplicaSet(ctx, newRS, size, d, false)
	return scaled, err
}

// reconcileOld shrinks old ReplicaSets as far as availability allows:
// first their unavailable pods, then available ones down to
// spec.replicas minus maxUnavailable. Its errors are logged, not returned
// (as KCM's): the status is written anyway and the next sync retries.
func (c *controller) reconcileOld(
	ctx context.Context,
	allRSs, oldRSs []*appsv1.ReplicaSet,
	newRS *appsv1.ReplicaSet,
	d *appsv1.Deployment,
) (bool, error) {
	log := logr.FromContextOrDiscard(ctx)
	if specReplicas(oldRSs) == 0 {
		return false, nil
	}
	minAvailable := desiredOf(d) - maxUnavailable(d)
	newUnavailable := replicasOf(newRS) - newRS.Status.AvailableReplicas
	budget := specReplicas(allRSs) - minAvailable - newUnavailable
	if budget <= 0 {
		return false, nil
	}
	oldRSs, cleaned, err := c.scaleDownUnhealthy(ctx, oldRSs, d, budget)
	if err != nil {
		log.V(2).Info("Scaling down unhealthy old ReplicaSets failed", "err", err.Error())
		return false, nil
	}
	scaled, err := c.scaleDownOldForRolling(ctx, append(oldRSs, newRS), oldRSs, d)
	if err != nil {
		log.V(2).Info("Scaling down old ReplicaSets failed", "err", err.Error())
		return false, nil
	}
	return cleaned+scaled > 0, nil
}

// scaleDownUnhealthy removes up to budget unavailable replicas from the old
// ReplicaSets, oldest first. It sorts oldRSs and returns them as written.
func (c *controller) scaleDownUnhealthy(
	ctx context.Context,
	oldRSs []*appsv1.ReplicaSet,
	d *appsv1.Deployment,
	budget int32,
) ([]*appsv1.ReplicaSet, int32, error) {
	sortStable(oldRSs, olderFirst)
	done := int32(0)
	for i, rs := range oldRSs {
		if done >= budget {
			break
		}
		cur := replicasOf(rs)
		if cur == 0 || cur == rs.Status.AvailableReplicas {
			continue
		}
		n := min(budget-done, cur-rs.Status.AvailableReplicas)
		if n < 0 {
			return nil, 0, fmt.Errorf(
				"replica set %s/%s reports more available replicas (%d) than it has (%d)",
				rs.Namespace,
				rs.Name,
				rs.Status.AvailableReplicas,
				cur,
			)
		}
		_, updated, err := c.scaleReplicaSet(ctx, rs, cur-n, d, false)
		if err != nil {
			return nil, done, err
		}
		done += n
		oldRSs[i] = updated
	}
	return oldRSs, done, nil
}

// scaleDownOldForRolling removes available old replicas, oldest
// ReplicaSet first, while more than spec.replicas minus maxUnavailable
// are available.
func (c *controller) scaleDownOldForRolling(
	ctx context.Context,
	allRSs, oldRSs []*appsv1.ReplicaSet,
	d *appsv1.Deployment,
) (int32, error) {
	minAvailable := desiredOf(d) - maxUnavailable(d)
	available := sumStatus(allRSs, statusAvailable)
	if available <= minAvailable {
		return 0, nil
	}
	sortStable(oldRSs, olderFirst)
	target := available - minAvailable
	done := int32(0)
	for _, rs := range oldRSs {
		if done >= target {
			break
		}
		cur := replicasOf(rs)
		if cur == 0 {
			continue
		}
		n := min(cur, target-done)
		if _, _, err := c.scaleReplicaSet(ctx, rs, cur-n, d, false); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}
