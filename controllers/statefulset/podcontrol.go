package statefulset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// title is KCM's event verb casing: "create" becomes "Create".
func title(verb string) string {
	if verb == "" {
		return verb
	}
	return strings.ToUpper(verb[:1]) + verb[1:]
}

// podEvent records KCM's event for a pod operation on the set.
func (c *controller) podEvent(verb string, set *appsv1.StatefulSet, p *corev1.Pod, err error) {
	if err == nil {
		c.recorder.Event(set, corev1.EventTypeNormal, "Successful"+title(verb),
			fmt.Sprintf("%s Pod %s in StatefulSet %s successful", title(verb), p.Name, set.Name))
		return
	}
	c.recorder.Event(set, corev1.EventTypeWarning, "Failed"+title(verb),
		fmt.Sprintf("%s Pod %s in StatefulSet %s failed error: %s", title(verb), p.Name,
			set.Name, err))
}

// claimEvent records KCM's event for a claim operation on the set.
func (c *controller) claimEvent(verb string, set *appsv1.StatefulSet, p *corev1.Pod,
	claim *corev1.PersistentVolumeClaim, err error) {
	if err == nil {
		c.recorder.Event(set, corev1.EventTypeNormal, "Successful"+title(verb),
			fmt.Sprintf("%s Claim %s Pod %s in StatefulSet %s success",
				title(verb), claim.Name, p.Name, set.Name))
		return
	}
	c.recorder.Event(set, corev1.EventTypeWarning, "Failed"+title(verb),
		fmt.Sprintf("%s Claim %s for Pod %s in StatefulSet %s failed error: %s",
			title(verb), claim.Name, p.Name, set.Name, err))
}

// wrote holds set's key until the informers deliver obj (the staleness
// guard), when the gate is on.
func (c *controller) wrote(set *appsv1.StatefulSet, obj any) {
	if c.staleGuard {
		c.loop.Wrote(set.Namespace+"/"+set.Name, obj)
	}
}

// createPod creates the pod's claims, then the pod, then sets the
// claims' owners for the retention policy.
func (c *controller) createPod(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	if err := c.createClaims(ctx, set, p); err != nil {
		c.podEvent("create", set, p, err)
		return err
	}
	created, err := c.client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return err
	}
	if err == nil {
		c.wrote(set, created)
	}
	if err := c.updateClaimsForRetention(ctx, set, p); err != nil {
		c.podEvent("update", set, p, err)
		return err
	}
	c.podEvent("create", set, p, err)
	return err
}

// updatePod gives the pod its identity, storage and claim owners. The
// cache may hold a pruned pod, so the pod is read from the API server
// before it is written.
func (c *controller) updatePod(ctx context.Context, set *appsv1.StatefulSet,
	cached *corev1.Pod) error {
	attempted := false
	p := cached
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		live, err := c.client.CoreV1().Pods(set.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p = live
		consistent := true
		if !identityMatches(set, p) {
			updateIdentity(set, p)
			consistent = false
		}
		if !storageMatches(set, p) {
			updateStorage(set, p)
			consistent = false
			if err := c.createClaims(ctx, set, p); err != nil {
				c.podEvent("update", set, p, err)
				return err
			}
		}
		match, err := c.claimsMatchRetention(set, p)
		if err != nil {
			c.podEvent("update", set, p, err)
			return err
		}
		if !match {
			if err := c.updateClaimsForRetention(ctx, set, p); err != nil {
				c.podEvent("update", set, p, err)
				return err
			}
			consistent = false
		}
		if consistent {
			return nil
		}
		attempted = true
		updated, err := c.client.CoreV1().Pods(set.Namespace).Update(ctx, p, metav1.UpdateOptions{})
		if err == nil {
			c.wrote(set, updated)
		}
		return err
	})
	if attempted {
		c.podEvent("update", set, p, err)
	}
	return err
}

// deletePod deletes the pod; one already gone counts as deleted.
func (c *controller) deletePod(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		c.podEvent("delete", set, p, err)
		return err
	}
	c.podEvent("delete", set, p, nil)
	return nil
}

// claimsMatchRetention: every existing claim of the pod has the owners the
// policy wants. A missing claim is picked up later.
func (c *controller) claimsMatchRetention(set *appsv1.StatefulSet, p *corev1.Pod) (bool, error) {
	ord := ordinalOf(p)
	for i := range set.Spec.VolumeClaimTemplates {
		name := claimName(set, &set.Spec.VolumeClaimTemplates[i], ord)
		claim, err := c.claimLister.PersistentVolumeClaims(set.Namespace).Get(name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, fmt.Errorf("could not retrieve claim %s for %s when checking "+
				"PVC deletion policy: %w", name, p.Name, err)
		default:
			if !claimOwnersUpToDate(claim, set, p) {
				return false, nil
			}
		}
	}
	return true, nil
}

// updateClaimsForRetention rewrites the owners of the pod's claims that
// do not follow the policy. The owner list is written with a merge patch
// guarded by the claim's resourceVersion: the cache holds claims' metadata
// only.
func (c *controller) updateClaimsForRetention(ctx context.Context, set *appsv1.StatefulSet,
	p *corev1.Pod) error {
	ord := ordinalOf(p)
	for i := range set.Spec.VolumeClaimTemplates {
		name := claimName(set, &set.Spec.VolumeClaimTemplates[i], ord)
		claim, err := c.claimLister.PersistentVolumeClaims(set.Namespace).Get(name)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("could not retrieve claim %s for %s when checking "+
				"PVC deletion policy: %w", name, p.Name, err)
		}
		if hasUnexpectedController(claim, set, p) {
			c.recorder.Event(set, corev1.EventTypeWarning, "ConflictingController",
				fmt.Sprintf("PersistentVolumeClaim %s has a conflicting OwnerReference that "+
					"acts as a manging controller, the retention policy is ignored for "+
					"this claim", name))
		}
		if claimOwnersUpToDate(claim, set, p) {
			continue
		}
		next := claim.DeepCopy()
		setClaimOwners(next, set, p)
		if err := c.patchClaimOwners(ctx, set, next); err != nil {
			return fmt.Errorf("could not update claim %s for delete policy ownerRefs: %w",
				name, err)
		}
	}
	return nil
}

func (c *controller) patchClaimOwners(ctx context.Context, set *appsv1.StatefulSet,
	claim *corev1.PersistentVolumeClaim) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": claim.OwnerReferences,
		"resourceVersion": claim.ResourceVersion,
	}})
	if err != nil {
		return err
	}
	updated, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx,
		claim.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err == nil {
		c.wrote(set, updated)
	}
	return err
}

// claimIsStale: under WhenScaled=Delete, one of the pod's claims still
// references a former pod of its name (to be deleted by the garbage
// collector before the pod is made again).
func (c *controller) claimIsStale(set *appsv1.StatefulSet, p *corev1.Pod) (bool, error) {
	if retentionPolicy(set).WhenScaled == appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		return false, nil
	}
	for _, want := range claimsOf(set, p) {
		claim, err := c.claimLister.PersistentVolumeClaims(want.Namespace).Get(want.Name)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return false, err
		}
		if hasStaleOwnerRef(claim, p, podKind) {
			return true, nil
		}
	}
	return false, nil
}

// createMissingClaims creates a pending pod's missing claims and sets
// their owners.
func (c *controller) createMissingClaims(ctx context.Context, set *appsv1.StatefulSet,
	p *corev1.Pod) error {
	if err := c.createClaims(ctx, set, p); err != nil {
		return err
	}
	if err := c.updateClaimsForRetention(ctx, set, p); err != nil {
		c.podEvent("update", set, p, err)
		return err
	}
	return nil
}

// createClaims creates the pod's claims that do not exist; a claim being
// deleted is an error (the pod must wait for it to go).
func (c *controller) createClaims(ctx context.Context, set *appsv1.StatefulSet,
	p *corev1.Pod) error {
	var errs []error
	claims := claimsOf(set, p)
	for i := range set.Spec.VolumeClaimTemplates {
		want := claims[set.Spec.VolumeClaimTemplates[i].Name]
		existing, err := c.claimLister.PersistentVolumeClaims(want.Namespace).Get(want.Name)
		switch {
		case apierrors.IsNotFound(err):
			created, err := c.client.CoreV1().PersistentVolumeClaims(want.Namespace).Create(ctx,
				&want, metav1.CreateOptions{})
			if err != nil {
				errs = append(errs, fmt.Errorf("failed to create PVC %s: %w", want.Name, err))
			} else {
				c.wrote(set, created)
			}
			if err == nil || !apierrors.IsAlreadyExists(err) {
				c.claimEvent("create", set, p, &want, err)
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("failed to retrieve PVC %s: %w", want.Name, err))
			c.claimEvent("create", set, p, &want, err)
		default:
			if existing.DeletionTimestamp != nil {
				errs = append(errs, fmt.Errorf("pvc %s is being deleted", want.Name))
			}
		}
	}
	return errors.Join(errs...)
}
