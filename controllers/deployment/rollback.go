package deployment

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rollbackTo reads the deprecated rollback annotation (what apps/v1beta1's
// rollbackTo became); nil when absent or unreadable.
func rollbackTo(d *appsv1.Deployment) *int64 {
	v := d.Annotations[appsv1.DeprecatedRollbackTo]
	if v == "" {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil
	}
	return &n
}

// rollback puts the template of the requested revision (0: the one before
// the newest) back into d's spec and clears the request.
func (c *controller) rollback(
	ctx context.Context,
	d *appsv1.Deployment,
	rsList []*appsv1.ReplicaSet,
) error {
	newRS, oldRSs, err := c.replicaSetsAndRevision(ctx, d, rsList, true)
	if err != nil {
		return err
	}
	allRSs := append(oldRSs, newRS)
	target := *rollbackTo(d)
	if target == 0 {
		if target = previousRevision(allRSs); target == 0 {
			c.recorder.Eventf(
				d,
				corev1.EventTypeWarning,
				eventRollbackRevisionNotFound,
				"Unable to find last revision.",
			)
			return c.clearRollback(ctx, d)
		}
	}
	for _, rs := range allRSs {
		if rs == nil {
			continue
		}
		if v, err := revision(rs); err != nil || v != target {
			continue
		}
		if sameTemplate(&d.Spec.Template, &rs.Spec.Template) {
			c.recorder.Eventf(
				d,
				corev1.EventTypeWarning,
				eventRollbackTemplateUnchanged,
				"The rollback revision contains the same template as current deployment %q",
				d.Name,
			)
			return c.clearRollback(ctx, d)
		}
		d.Spec.Template.ObjectMeta = *rs.Spec.Template.ObjectMeta.DeepCopy()
		d.Spec.Template.Spec = *rs.Spec.Template.Spec.DeepCopy()
		delete(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
		kept := map[string]string{}
		for k, v := range d.Annotations {
			if notCopied[k] {
				kept[k] = v
			}
		}
		for k, v := range rs.Annotations {
			if !notCopied[k] {
				kept[k] = v
			}
		}
		d.Annotations = kept
		if err := c.clearRollback(ctx, d); err != nil {
			return err
		}
		c.recorder.Eventf(
			d,
			corev1.EventTypeNormal,
			eventRollbackDone,
			"Rolled back deployment %q to revision %d",
			d.Name,
			target,
		)
		return nil
	}
	c.recorder.Eventf(
		d,
		corev1.EventTypeWarning,
		eventRollbackRevisionNotFound,
		"Unable to find the revision to rollback to.",
	)
	return c.clearRollback(ctx, d)
}

// previousRevision is the second highest revision among rss.
func previousRevision(rss []*appsv1.ReplicaSet) int64 {
	var top, second int64
	for _, rs := range rss {
		if rs == nil {
			continue
		}
		v, err := revision(rs)
		switch {
		case err != nil:
		case v >= top:
			second, top = top, v
		case v > second:
			second = v
		}
	}
	return second
}

// clearRollback removes the rollback annotation and writes d (spec and
// metadata).
func (c *controller) clearRollback(ctx context.Context, d *appsv1.Deployment) error {
	delete(d.Annotations, appsv1.DeprecatedRollbackTo)
	updated, err := c.client.AppsV1().
		Deployments(d.Namespace).
		Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("clearing the rollback request of deployment %s: %w", keyOf(d), err)
	}
	c.loop.Wrote(keyOf(d), updated)
	return nil
}
