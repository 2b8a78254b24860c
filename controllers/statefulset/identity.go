package statefulset

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podcontrol"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
)

var (
	controllerKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	podKind        = corev1.SchemeGroupVersion.WithKind("Pod")
)

// podNameRE splits a pod name into its set's name and its ordinal.
var podNameRE = regexp.MustCompile("(.*)-([0-9]+)$")

// parentAndOrdinal returns the set a pod's name says it belongs to and its
// ordinal; "" and -1 when the name has no ordinal.
func parentAndOrdinal(p *corev1.Pod) (string, int) {
	m := podNameRE.FindStringSubmatch(p.Name)
	if len(m) < 3 {
		return "", -1
	}
	ord := -1
	if i, err := strconv.ParseInt(m[2], 10, 32); err == nil {
		ord = int(i)
	}
	return m[1], ord
}

func ordinalOf(p *corev1.Pod) int {
	_, o := parentAndOrdinal(p)
	return o
}

// startOrdinal is spec.ordinals.start, or 0.
func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

func replicasOf(set *appsv1.StatefulSet) int {
	if set.Spec.Replicas == nil {
		return 1
	}
	return int(*set.Spec.Replicas)
}

// endOrdinal is the last ordinal the set keeps (inclusive).
func endOrdinal(set *appsv1.StatefulSet) int {
	return startOrdinal(set) + replicasOf(set) - 1
}

func inOrdinalRange(p *corev1.Pod, set *appsv1.StatefulSet) bool {
	o := ordinalOf(p)
	return o >= startOrdinal(set) && o <= endOrdinal(set)
}

func podName(set *appsv1.StatefulSet, ordinal int) string {
	return fmt.Sprintf("%s-%d", set.Name, ordinal)
}

// claimName is "<template>-<set>-<ordinal>".
func claimName(set *appsv1.StatefulSet, tmpl *corev1.PersistentVolumeClaim, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", tmpl.Name, set.Name, ordinal)
}

func isMemberOf(set *appsv1.StatefulSet, p *corev1.Pod) bool {
	parent, _ := parentAndOrdinal(p)
	return parent == set.Name
}

// identityMatches: the pod's name, namespace and pod-name label are those
// of a member of set.
func identityMatches(set *appsv1.StatefulSet, p *corev1.Pod) bool {
	parent, ord := parentAndOrdinal(p)
	return ord >= 0 && parent == set.Name && p.Name == podName(set, ord) &&
		p.Namespace == set.Namespace && p.Labels[appsv1.StatefulSetPodNameLabel] == p.Name
}

// storageMatches: every claim template has its volume, naming the pod's
// claim.
func storageMatches(set *appsv1.StatefulSet, p *corev1.Pod) bool {
	ord := ordinalOf(p)
	if ord < 0 {
		return false
	}
	vols := make(map[string]corev1.Volume, len(p.Spec.Volumes))
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v
	}
	for i := range set.Spec.VolumeClaimTemplates {
		t := &set.Spec.VolumeClaimTemplates[i]
		v, ok := vols[t.Name]
		if !ok || v.PersistentVolumeClaim == nil ||
			v.PersistentVolumeClaim.ClaimName != claimName(set, t, ord) {
			return false
		}
	}
	return true
}

// retentionPolicy is the set's policy, Retain/Retain when unset.
func retentionPolicy(
	set *appsv1.StatefulSet) appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy {
	if set.Spec.PersistentVolumeClaimRetentionPolicy != nil {
		return *set.Spec.PersistentVolumeClaimRetentionPolicy
	}
	return appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
	}
}

// claimsOf returns the pod's claims by template name, each named for the
// pod and labelled with the template's labels and the selector's
// matchLabels.
func claimsOf(set *appsv1.StatefulSet, p *corev1.Pod) map[string]corev1.PersistentVolumeClaim {
	ord := ordinalOf(p)
	out := make(map[string]corev1.PersistentVolumeClaim, len(set.Spec.VolumeClaimTemplates))
	for i := range set.Spec.VolumeClaimTemplates {
		t := &set.Spec.VolumeClaimTemplates[i]
		c := t.DeepCopy()
		c.Name = claimName(set, t, ord)
		c.Namespace = set.Namespace
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		if set.Spec.Selector != nil {
			maps.Copy(c.Labels, set.Spec.Selector.MatchLabels)
		}
		out[t.Name] = *c
	}
	return out
}

// updateStorage points the pod's template-named volumes at its claims,
// keeping its other volumes after them.
func updateStorage(set *appsv1.StatefulSet, p *corev1.Pod) {
	claims := claimsOf(set, p)
	vols := make([]corev1.Volume, 0, len(claims)+len(p.Spec.Volumes))
	// In template order: KCM ranges over a map, so its order is random;
	// any order is KCM's.
	for i := range set.Spec.VolumeClaimTemplates {
		name := set.Spec.VolumeClaimTemplates[i].Name
		c := claims[name]
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name},
		}})
	}
	for _, v := range p.Spec.Volumes {
		if _, ok := claims[v.Name]; !ok {
			vols = append(vols, v)
		}
	}
	p.Spec.Volumes = vols
}

// updateIdentity gives the pod its name, namespace, and the pod-name and
// pod-index labels.
func updateIdentity(set *appsv1.StatefulSet, p *corev1.Pod) {
	ord := ordinalOf(p)
	p.Name = podName(set, ord)
	p.Namespace = set.Namespace
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[appsv1.StatefulSetPodNameLabel] = p.Name
	p.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ord)
}

// newPod is the pod of ordinal built from set's template, with its
// identity, hostname, subdomain and volumes.
func newPod(set *appsv1.StatefulSet, ordinal int) (*corev1.Pod, error) {
	p, err := podcontrol.FromTemplate(&set.Spec.Template, set,
		metav1.NewControllerRef(set, controllerKind))
	if err != nil {
		return nil, err
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Name = podName(set, ordinal)
	updateIdentity(set, p)
	p.Spec.Hostname = p.Name
	p.Spec.Subdomain = set.Spec.ServiceName
	updateStorage(set, p)
	return p, nil
}

// newVersionedPod builds the pod of ordinal at the current revision when
// it is below the partition (or, without rollingUpdate under
// RollingUpdate, among the current replicas), else at the update revision.
// The condition keeps KCM's grouping.
func newVersionedPod(cur, upd *appsv1.StatefulSet, curRev, updRev string,
	ordinal int) (*corev1.Pod, error) {
	ru := cur.Spec.UpdateStrategy.RollingUpdate
	start := startOrdinal(cur)
	if cur.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		(ru == nil && ordinal < start+int(cur.Status.CurrentReplicas)) ||
		(ru != nil && ordinal < start+int(partitionOf(ru))) {
		p, err := newPod(cur, ordinal)
		if err != nil {
			return nil, err
		}
		setPodRevision(p, curRev)
		return p, nil
	}
	p, err := newPod(upd, ordinal)
	if err != nil {
		return nil, err
	}
	setPodRevision(p, updRev)
	return p, nil
}

func partitionOf(ru *appsv1.RollingUpdateStatefulSetStrategy) int32 {
	if ru == nil || ru.Partition == nil {
		return 0
	}
	return *ru.Partition
}

func setPodRevision(p *corev1.Pod, rev string) {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[appsv1.StatefulSetRevisionLabel] = rev
}

func podRevision(p *corev1.Pod) string { return p.Labels[appsv1.StatefulSetRevisionLabel] }

func isRunningAndReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podstate.IsReady(p)
}

func isAvailable(p *corev1.Pod, minReady int32, now time.Time) bool {
	return podstate.IsAvailable(p, minReady, now)
}

// isCreated: the API server has it (it has a phase).
func isCreated(p *corev1.Pod) bool { return p.Status.Phase != "" }

func isPending(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodPending }

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

func isTerminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

func isUnavailable(p *corev1.Pod, minReady int32, now time.Time) bool {
	return !podstate.IsAvailable(p, minReady, now) || isTerminating(p)
}

func parallel(set *appsv1.StatefulSet) bool {
	return set.Spec.PodManagementPolicy == appsv1.ParallelPodManagement
}

// Claim ownership under the retention policy.

func matchesRef(ref *metav1.OwnerReference, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	return gvk.GroupVersion().String() == ref.APIVersion && gvk.Kind == ref.Kind &&
		ref.Name == obj.GetName()
}

// hasUnexpectedController: under a policy other than Retain/Retain, the
// claim has a controller that is neither the set nor the pod, or a
// reference to a former set or pod of the same name.
func hasUnexpectedController(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet,
	p *corev1.Pod) bool {
	pol := retentionPolicy(set)
	const retain = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if pol.WhenScaled == retain && pol.WhenDeleted == retain {
		return false
	}
	for i := range claim.OwnerReferences {
		ref := &claim.OwnerReferences[i]
		if matchesRef(ref, set, controllerKind) {
			if ref.UID != set.UID {
				return true
			}
			continue
		}
		if matchesRef(ref, p, podKind) {
			if ref.UID != p.UID {
				return true
			}
			continue
		}
		if ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

// hasNonControllerOwner: the set or pod owns the claim without being its
// controller.
func hasNonControllerOwner(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet,
	p *corev1.Pod) bool {
	for _, ref := range claim.OwnerReferences {
		if (ref.UID == set.UID || ref.UID == p.UID) && (ref.Controller == nil || !*ref.Controller) {
			return true
		}
	}
	return false
}

func hasOwnerRef(target, owner metav1.Object) bool {
	for _, ref := range target.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// hasStaleOwnerRef: the first reference naming obj has another UID.
func hasStaleOwnerRef(target *corev1.PersistentVolumeClaim, obj metav1.Object,
	gvk schema.GroupVersionKind) bool {
	for i := range target.OwnerReferences {
		if matchesRef(&target.OwnerReferences[i], obj, gvk) {
			return target.OwnerReferences[i].UID != obj.GetUID()
		}
	}
	return false
}

// claimOwnersUpToDate: the claim's references follow the policy —
// Retain/Retain none; Retain on scale, Delete on delete: the set; Delete
// on scale, Retain on delete: the pod once scaled down; Delete/Delete:
// the set while in range, the pod once scaled down. A claim with stale
// references or another controller is left alone.
func claimOwnersUpToDate(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet,
	p *corev1.Pod) bool {
	if hasStaleOwnerRef(claim, set, controllerKind) || hasStaleOwnerRef(claim, p, podKind) {
		return true
	}
	if hasUnexpectedController(claim, set, p) {
		return !hasOwnerRef(claim, set) && !hasOwnerRef(claim, p)
	}
	if hasNonControllerOwner(claim, set, p) {
		return false
	}
	pol := retentionPolicy(set)
	const del = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	scaledDown := !inOrdinalRange(p, set)
	switch {
	case pol.WhenScaled != del && pol.WhenDeleted != del:
		return !hasOwnerRef(claim, set) && !hasOwnerRef(claim, p)
	case pol.WhenScaled != del && pol.WhenDeleted == del:
		return hasOwnerRef(claim, set) && !hasOwnerRef(claim, p)
	case pol.WhenScaled == del && pol.WhenDeleted != del:
		return !hasOwnerRef(claim, set) && scaledDown == hasOwnerRef(claim, p)
	default:
		return scaledDown != hasOwnerRef(claim, set) && scaledDown == hasOwnerRef(claim, p)
	}
}

// setClaimOwners rewrites the claim's references to the set and pod to
// follow the policy (none, when another controller has it).
func setClaimOwners(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, p *corev1.Pod) {
	unexpected := hasUnexpectedController(claim, set, p)
	refs := []metav1.OwnerReference{}
	for _, ref := range claim.OwnerReferences {
		if !matchesRef(&ref, set, controllerKind) && !matchesRef(&ref, p, podKind) {
			refs = append(refs, ref)
		}
	}
	if !unexpected {
		pol := retentionPolicy(set)
		const del = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
		scaledDown := !inOrdinalRange(p, set)
		switch {
		case pol.WhenScaled != del && pol.WhenDeleted == del:
			refs = addControllerRef(refs, set, controllerKind)
		case pol.WhenScaled == del && pol.WhenDeleted != del:
			if scaledDown {
				refs = addControllerRef(refs, p, podKind)
			}
		case pol.WhenScaled == del && pol.WhenDeleted == del:
			if scaledDown {
				refs = addControllerRef(refs, p, podKind)
			} else {
				refs = addControllerRef(refs, set, controllerKind)
			}
		}
	}
	claim.OwnerReferences = refs
}

func addControllerRef(refs []metav1.OwnerReference, owner metav1.Object,
	gvk schema.GroupVersionKind) []metav1.OwnerReference {
	for _, r := range refs {
		if r.UID == owner.GetUID() {
			return refs
		}
	}
	return append(refs, *metav1.NewControllerRef(owner, gvk))
}
