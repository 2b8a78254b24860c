package daemonset

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"

	"github.com/ctrlhost/ctrlhost/controllers/internal/ownership"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podtemplate"
)

// isCurrent reports whether cr records ds's current template.
func isCurrent(ds *appsv1.DaemonSet, cr *appsv1.ControllerRevision) (bool, error) {
	data, err := podtemplate.RevisionPatch(ds)
	if err != nil {
		return false, err
	}
	return bytes.Equal(data, cr.Data.Raw), nil
}

// history finds ds's revisions (adopting and releasing as needed), makes
// sure one records the current template with the highest revision
// number, and returns it and the others.
func (c *controller) history(
	ctx context.Context,
	ds *appsv1.DaemonSet,
) (cur *appsv1.ControllerRevision, old []*appsv1.ControllerRevision, err error) {
	all, err := c.claimRevisions(ctx, ds)
	if err != nil {
		return nil, nil, err
	}
	var current []*appsv1.ControllerRevision
	for _, cr := range all {
		if _, ok := cr.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; !ok {
			// Label it with its name: the hash it was made with may have
			// collided, the name is unique.
			fixed := cr.DeepCopy()
			if fixed.Labels == nil {
				fixed.Labels = map[string]string{}
			}
			fixed.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = fixed.Name
			if cr, err = c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, fixed,
				metav1.UpdateOptions{}); err != nil {
				return nil, nil, err
			}
		}
		match, err := isCurrent(ds, cr)
		if err != nil {
			return nil, nil, err
		}
		if match {
			current = append(current, cr)
		} else {
			old = append(old, cr)
		}
	}
	next := maxRevision(old) + 1
	if len(current) == 0 {
		cur, err = c.snapshot(ctx, ds, next)
		if err != nil {
			return nil, nil, err
		}
		return cur, old, nil
	}
	cur, err = c.dedupCurrent(ctx, ds, current)
	if err != nil {
		return nil, nil, err
	}
	if cur.Revision < next {
		bumped := cur.DeepCopy()
		bumped.Revision = next
		if _, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, bumped,
			metav1.UpdateOptions{}); err != nil {
			return nil, nil, err
		}
	}
	return cur, old, nil
}

// claimRevisions lists every revision of ds's namespace (those that no
// longer match its selector but are still its own included) and claims
// them through ownership.
func (c *controller) claimRevisions(
	ctx context.Context,
	ds *appsv1.DaemonSet,
) ([]*appsv1.ControllerRevision, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	all, err := c.revLister.ControllerRevisions(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	m, err := ownership.New[*appsv1.ControllerRevision](ownership.Config{
		Owner:     ds,
		OwnerKind: controllerKind,
		Selector:  sel,
		Patch: func(ctx context.Context, namespace, name string, patch []byte) error {
			_, err := c.client.AppsV1().
				ControllerRevisions(namespace).
				Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		},
		Recheck: c.recheck(ds),
	})
	if err != nil {
		return nil, err
	}
	return m.Claim(ctx, all)
}

// recheck reads ds from the API server, for adoption: it must still exist
// with the same UID.
func (c *controller) recheck(ds *appsv1.DaemonSet) func(context.Context) (metav1.Object, error) {
	return func(ctx context.Context) (metav1.Object, error) {
		fresh, err := c.client.AppsV1().
			DaemonSets(ds.Namespace).
			Get(ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if fresh.UID != ds.UID {
			return nil, fmt.Errorf(
				"original DaemonSet %s/%s is gone: got uid %s, wanted %s",
				ds.Namespace,
				ds.Name,
				fresh.UID,
				ds.UID,
			)
		}
		return fresh, nil
	}
}

func maxRevision(crs []*appsv1.ControllerRevision) int64 {
	var m int64
	for _, cr := range crs {
		m = max(m, cr.Revision)
	}
	return m
}

// snapshot creates the revision of ds's current template. A namesake that
// records the same template is the one wanted (created by an earlier sync
// whose event has not arrived); one that records another template is a
// hash collision: status.collisionCount is raised (on a fresh read of ds)
// and the sync fails, to be retried under the new hash.
func (c *controller) snapshot(
	ctx context.Context,
	ds *appsv1.DaemonSet,
	revision int64,
) (*appsv1.ControllerRevision, error) {
	data, err := podtemplate.RevisionPatch(ds)
	if err != nil {
		return nil, err
	}
	hash := podtemplate.Hash(&ds.Spec.Template, ds.Status.CollisionCount)
	name := podtemplate.RevisionName(ds.Name, hash)
	lbls := maps.Clone(ds.Spec.Template.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       ds.Namespace,
			Labels:          lbls,
			Annotations:     maps.Clone(ds.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: revision,
	}
	created, err := c.client.AppsV1().
		ControllerRevisions(ds.Namespace).
		Create(ctx, cr, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return created, err
	}
	createErr := err
	existing, err := c.client.AppsV1().
		ControllerRevisions(ds.Namespace).
		Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if same, err := isCurrent(ds, existing); err != nil || same {
		return existing, err
	}
	fresh, err := c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if !equality.Semantic.DeepEqual(fresh.Status.CollisionCount, ds.Status.CollisionCount) {
		return nil, fmt.Errorf(
			"DaemonSet %s/%s: collisionCount %v is stale (now %v); retrying once the cache has it",
			ds.Namespace,
			ds.Name,
			derefOr(ds.Status.CollisionCount),
			derefOr(fresh.Status.CollisionCount),
		)
	}
	n := derefOr(fresh.Status.CollisionCount) + 1
	fresh.Status.CollisionCount = &n
	if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, fresh,
		metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	c.log.V(2).
		Info("Hash collision; raised collisionCount", "daemonset", keyOf(ds), "collisionCount", n)
	return nil, createErr
}

func derefOr(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// dedupCurrent keeps the current revision with the highest number (the
// last of them on a tie), relabels ds's pods that carry another current
// revision's hash, and deletes the other current revisions.
func (c *controller) dedupCurrent(
	ctx context.Context,
	ds *appsv1.DaemonSet,
	current []*appsv1.ControllerRevision,
) (*appsv1.ControllerRevision, error) {
	if len(current) == 1 {
		return current[0], nil
	}
	var keep *appsv1.ControllerRevision
	var best int64
	for _, cr := range current {
		if cr.Revision >= best {
			keep, best = cr, cr.Revision
		}
	}
	hash := keep.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	pods, err := c.claimPods(ctx, ds)
	if err != nil {
		return nil, err
	}
	patch, err := json.Marshal(
		map[string]any{
			"metadata": map[string]any{
				"labels": map[string]any{appsv1.DefaultDaemonSetUniqueLabelKey: hash},
			},
		},
	)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash {
			continue
		}
		if _, err := c.client.CoreV1().Pods(ds.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch,
			metav1.PatchOptions{}); err != nil {
			return nil, err
		}
	}
	for _, cr := range current {
		if cr.Name == keep.Name {
			continue
		}
		if err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, cr.Name,
			metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
	}
	return keep, nil
}

// cleanupHistory deletes the oldest of old beyond
// spec.revisionHistoryLimit, sparing any whose hash a pod of ds still
// carries (terminated pods being deleted included).
func (c *controller) cleanupHistory(
	ctx context.Context,
	ds *appsv1.DaemonSet,
	old []*appsv1.ControllerRevision,
) error {
	byNode, err := c.podsByNode(ctx, ds, true)
	if err != nil {
		return err
	}
	limit := 10
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	excess := len(old) - limit
	if excess <= 0 {
		return nil
	}
	live := map[string]bool{}
	for _, pods := range byNode {
		for _, p := range pods {
			if h := p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; h != "" {
				live[h] = true
			}
		}
	}
	old = slices.Clone(old)
	sort.SliceStable(old, func(i, j int) bool { return old[i].Revision < old[j].Revision })
	for _, cr := range old {
		if excess <= 0 {
			break
		}
		if live[cr.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] {
			continue
		}
		if err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, cr.Name,
			metav1.DeleteOptions{}); err != nil {
			return err
		}
		excess--
	}
	return nil
}
