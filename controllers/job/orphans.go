package job

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ctrlhost/ctrlhost/workloop"
)

// Keys of the orphan loop: "pod/<ns>/<name>" names one pod,
// "selector/<ns>/<selector>" every pod of a namespace a selector matches.
const (
	orphanPodPrefix      = "pod/"
	orphanSelectorPrefix = "selector/"
)

func (c *controller) enqueueOrphanPod(p *corev1.Pod) {
	c.orphans.Add(orphanPodPrefix + p.Namespace + "/" + p.Name)
}

// enqueueSelector asks for the tracking finalizer to be removed from every
// pod that j selects and no unfinished Job controls: j finished or went.
func (c *controller) enqueueSelector(j *batchv1.Job) {
	sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
	if err != nil {
		c.log.Error(err, "Job has an invalid label selector", "job", jobKey(j))
		return
	}
	c.orphans.Add(orphanSelectorPrefix + j.Namespace + "/" + sel.String())
}

// syncOrphan removes the tracking finalizer from the pods key names that
// no unfinished Job of this controller owns.
func (c *controller) syncOrphan(ctx context.Context, key string) error {
	kind, rest, ok := strings.Cut(key, "/")
	ns, value, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return workloop.Permanent(fmt.Errorf("malformed orphan key %q", key))
	}
	switch kind + "/" {
	case orphanPodPrefix:
		p, err := c.podLister.Pods(ns).Get(value)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return c.releaseOrphan(ctx, p)
	case orphanSelectorPrefix:
		sel, err := labels.Parse(value)
		if err != nil {
			return workloop.Permanent(fmt.Errorf("orphan key %q: %w", key, err))
		}
		pods, err := c.podLister.Pods(ns).List(sel)
		if err != nil {
			return err
		}
		for _, p := range pods {
			if err := c.releaseOrphan(ctx, p); err != nil {
				logFrom(
					ctx,
				).Error(err, "Removing the tracking finalizer from an orphan pod", "pod", podKey(p))
				c.orphans.AddRateLimited(orphanPodPrefix + p.Namespace + "/" + p.Name)
			}
		}
		return nil
	}
	return workloop.Permanent(fmt.Errorf("malformed orphan key %q", key))
}

// releaseOrphan removes p's tracking finalizer unless a Job this controller
// manages and that has not finished controls it (or p is not a Job's).
func (c *controller) releaseOrphan(ctx context.Context, p *corev1.Pod) error {
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		if ref.Kind != jobKind.Kind || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
			return nil
		}
		if j := c.resolve(p.Namespace, ref); j != nil {
			if c.managedElsewhere(j) || !isFinished(j) {
				return nil
			}
		}
	}
	if !hasTrackingFinalizer(p) {
		return nil
	}
	if _, err := c.patchPod(ctx, p.Namespace, p.Name, removeFinalizerPatch); err != nil &&
		!apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
