package deployment

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Annotations the controller writes, as KCM names them.
const (
	// annotationRevision is a ReplicaSet's place in its Deployment's rollout
	// history; the Deployment carries its newest ReplicaSet's.
	annotationRevision = "deployment.kubernetes.io/revision"
	// annotationRevisionHistory lists the earlier revisions a ReplicaSet
	// served (when a rollout went back to its template).
	annotationRevisionHistory = "deployment.kubernetes.io/revision-history"
	// annotationDesiredReplicas is the Deployment's spec.replicas when the
	// ReplicaSet was last sized.
	annotationDesiredReplicas = "deployment.kubernetes.io/desired-replicas"
	// annotationMaxReplicas is spec.replicas plus maxSurge at that time.
	annotationMaxReplicas = "deployment.kubernetes.io/max-replicas"
)

// revisionHistoryMaxChars bounds the revision-history annotation.
const revisionHistoryMaxChars = 2000

// notCopied are the Deployment annotations never copied to its ReplicaSets.
var notCopied = map[string]bool{
	corev1.LastAppliedConfigAnnotation: true,
	annotationRevision:                 true,
	annotationRevisionHistory:          true,
	annotationDesiredReplicas:          true,
	annotationMaxReplicas:              true,
	appsv1.DeprecatedRollbackTo:        true,
}

func replicasOf(rs *appsv1.ReplicaSet) int32 {
	if rs == nil {
		return 0
	}
	return ptr.Deref(rs.Spec.Replicas, 1)
}

func desiredOf(d *appsv1.Deployment) int32 { return ptr.Deref(d.Spec.Replicas, 1) }

func isRolling(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// fenceposts resolves maxSurge (rounded up) and maxUnavailable (rounded
// down) against desired replicas; when both come to zero, one pod may be
// unavailable, so that a rollout can proceed at all.
func fenceposts(surge, unavailable *intstr.IntOrString, desired int32) (int32, int32, error) {
	zero := intstr.FromInt32(0)
	s, err := intstr.GetScaledValueFromIntOrPercent(
		intstr.ValueOrDefault(surge, zero),
		int(desired),
		true,
	)
	if err != nil {
		return 0, 0, fmt.Errorf("spec.strategy.rollingUpdate.maxSurge: %w", err)
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(
		intstr.ValueOrDefault(unavailable, zero),
		int(desired),
		false,
	)
	if err != nil {
		return 0, 0, fmt.Errorf("spec.strategy.rollingUpdate.maxUnavailable: %w", err)
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u), nil
}

func rollingParams(d *appsv1.Deployment) (surge, unavailable *intstr.IntOrString) {
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		return ru.MaxSurge, ru.MaxUnavailable
	}
	return nil, nil
}

// maxSurge is how many pods over spec.replicas a rolling Deployment may
// have; 0 for Recreate. Invalid values (refused by validation) count as 0.
func maxSurge(d *appsv1.Deployment) int32 {
	if !isRolling(d) {
		return 0
	}
	s, u := rollingParams(d)
	surge, _, _ := fenceposts(s, u, desiredOf(d))
	return surge
}

// maxUnavailable is how many of spec.replicas may be unavailable during a
// rolling update, at most spec.replicas; 0 for Recreate.
func maxUnavailable(d *appsv1.Deployment) int32 {
	if !isRolling(d) || desiredOf(d) == 0 {
		return 0
	}
	s, u := rollingParams(d)
	_, unavailable, _ := fenceposts(s, u, desiredOf(d))
	return min(unavailable, desiredOf(d))
}

// newReplicaCount is the size the new ReplicaSet may have now: for a
// rolling update, as many more as the surge allows without exceeding
// spec.replicas; for Recreate, spec.replicas.
func newReplicaCount(
	d *appsv1.Deployment,
	all []*appsv1.ReplicaSet,
	newRS *appsv1.ReplicaSet,
) (int32, error) {
	switch d.Spec.Strategy.Type {
	case appsv1.RollingUpdateDeploymentStrategyType:
		s, u := rollingParams(d)
		surge, _, err := fenceposts(s, u, desiredOf(d))
		if err != nil {
			return 0, err
		}
		total := specReplicas(all)
		ceiling := desiredOf(d) + surge
		if total >= ceiling {
			return replicasOf(newRS), nil
		}
		up := min(ceiling-total, desiredOf(d)-replicasOf(newRS))
		return replicasOf(newRS) + up, nil
	case appsv1.RecreateDeploymentStrategyType:
		return desiredOf(d), nil
	}
	return 0, fmt.Errorf("spec.strategy.type %q is not supported", d.Spec.Strategy.Type)
}

// saturated: rs is sized for the whole Deployment, believes so (its
// desired-replicas annotation) and all its pods are available.
func saturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	want, err := strconv.Atoi(rs.Annotations[annotationDesiredReplicas])
	if err != nil {
		return false
	}
	return replicasOf(rs) == desiredOf(d) && int32(want) == desiredOf(d) &&
		rs.Status.AvailableReplicas == desiredOf(d)
}

// annotationCount reads a non-negative int32 annotation.
func annotationCount(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// share is rs's part of toAdd (negative: to remove) replicas when a
// Deployment is resized in the middle of a rollout, given added so far.
func share(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if rs == nil || replicasOf(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	f := fraction(rs, d)
	left := toAdd - added
	if toAdd > 0 {
		return min(f, left)
	}
	return max(f, left)
}

// fraction is how much rs grows (or shrinks) so that it keeps its
// proportion of the Deployment's maximum size before and after a resize.
func fraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	if desiredOf(d) == 0 {
		return -replicasOf(rs)
	}
	after := desiredOf(d) + maxSurge(d)
	before, ok := annotationCount(rs, annotationMaxReplicas)
	if !ok || before == 0 {
		before = d.Status.Replicas
		if before == 0 {
			return 0
		}
	}
	size := float64(replicasOf(rs)*after) / float64(before)
	return int32(math.Round(size)) - replicasOf(rs)
}

// Sums over ReplicaSets.

func specReplicas(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += replicasOf(rs)
		}
	}
	return n
}

func sumStatus(rss []*appsv1.ReplicaSet, f func(appsv1.ReplicaSetStatus) int32) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += f(rs.Status)
		}
	}
	return n
}

func statusReplicas(s appsv1.ReplicaSetStatus) int32  { return s.Replicas }
func statusReady(s appsv1.ReplicaSetStatus) int32     { return s.ReadyReplicas }
func statusAvailable(s appsv1.ReplicaSetStatus) int32 { return s.AvailableReplicas }

// terminatingReplicas sums the ReplicaSets' terminatingReplicas; nil when
// one that its controller has synced does not report the field.
func terminatingReplicas(rss []*appsv1.ReplicaSet) *int32 {
	var n int32
	for _, rs := range rss {
		switch {
		case rs == nil:
		case rs.Status.TerminatingReplicas == nil && rs.Status.ObservedGeneration == 0:
			// never synced: counts nothing
		case rs.Status.TerminatingReplicas == nil:
			return nil
		default:
			n += *rs.Status.TerminatingReplicas
		}
	}
	return &n
}

func active(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && replicasOf(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// Orders.

// olderFirst orders by creation time, then name.
func olderFirst(a, b *appsv1.ReplicaSet) int {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return strings.Compare(a.Name, b.Name)
	}
	if a.CreationTimestamp.Before(&b.CreationTimestamp) {
		return -1
	}
	return 1
}

// biggerOlderFirst orders by size, largest first, then older first.
func biggerOlderFirst(a, b *appsv1.ReplicaSet) int {
	if replicasOf(a) != replicasOf(b) {
		return int(replicasOf(b)) - int(replicasOf(a))
	}
	return olderFirst(a, b)
}

// biggerNewerFirst orders by size, largest first, then newer first.
func biggerNewerFirst(a, b *appsv1.ReplicaSet) int {
	if replicasOf(a) != replicasOf(b) {
		return int(replicasOf(b)) - int(replicasOf(a))
	}
	return olderFirst(b, a)
}

// byRevision orders by revision, then older first (also when a revision
// does not parse).
func byRevision(a, b *appsv1.ReplicaSet) int {
	ra, errA := revision(a)
	rb, errB := revision(b)
	if errA != nil || errB != nil || ra == rb {
		return olderFirst(a, b)
	}
	if ra < rb {
		return -1
	}
	return 1
}

// sortStable sorts in place; the orders are total, so stability only
// matters for identical entries.
func sortStable(rss []*appsv1.ReplicaSet, cmp func(a, b *appsv1.ReplicaSet) int) {
	slices.SortStableFunc(rss, cmp)
}

// Templates and revisions.

// sameTemplate compares pod templates, ignoring the pod-template-hash
// label.
func sameTemplate(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return equality.Semantic.DeepEqual(a, b)
}

// findNew returns the oldest ReplicaSet with d's template; it sorts rss.
func findNew(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sortStable(rss, olderFirst)
	for _, rs := range rss {
		if sameTemplate(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// findOld returns every ReplicaSet but the new one.
func findOld(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	newRS := findNew(d, rss)
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if newRS != nil && rs.UID == newRS.UID {
			continue
		}
		out = append(out, rs)
	}
	return out
}

// revision is rs's revision annotation; 0 when absent.
func revision(rs *appsv1.ReplicaSet) (int64, error) {
	v, ok := rs.Annotations[annotationRevision]
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		if v, err := revision(rs); err == nil && v > m {
			m = v
		}
	}
	return m
}

// copyAnnotations copies d's annotations, except notCopied, to rs and
// reports whether one changed.
func copyAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if cur, ok := rs.Annotations[k]; notCopied[k] || ok && cur == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	return changed
}

// setReplicasAnnotations writes the desired- and max-replicas annotations
// and reports whether either changed.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range map[string]string{
		annotationDesiredReplicas: strconv.Itoa(int(desired)),
		annotationMaxReplicas:     strconv.Itoa(int(maxReplicas)),
	} {
		if rs.Annotations[k] != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

func replicasAnnotationsStale(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	return rs.Annotations == nil ||
		rs.Annotations[annotationDesiredReplicas] != strconv.Itoa(int(desired)) ||
		rs.Annotations[annotationMaxReplicas] != strconv.Itoa(int(maxReplicas))
}

// setNewRSAnnotations brings the new ReplicaSet's annotations up to date:
// d's copied annotations, the revision (raised to newRevision, never
// lowered; a raised one is appended to the revision history), and for a
// ReplicaSet about to be created the replica annotations. It reports
// whether anything changed.
func setNewRSAnnotations(
	d *appsv1.Deployment,
	rs *appsv1.ReplicaSet,
	newRevision int64,
	exists bool,
) bool {
	changed := copyAnnotations(d, rs)
	old, had := rs.Annotations[annotationRevision]
	oldRev := int64(0)
	if old != "" {
		v, err := strconv.ParseInt(old, 10, 64)
		if err != nil {
			return false // as KCM: an unreadable revision is left alone
		}
		oldRev = v
	}
	if oldRev < newRevision {
		rs.Annotations[annotationRevision] = strconv.FormatInt(newRevision, 10)
		changed = true
		if had {
			appendRevisionHistory(rs, old)
		}
	}
	if !exists && setReplicasAnnotations(rs, desiredOf(d), desiredOf(d)+maxSurge(d)) {
		changed = true
	}
	return changed
}

// appendRevisionHistory appends old to the revision-history annotation,
// dropping its oldest entries to stay within revisionHistoryMaxChars.
func appendRevisionHistory(rs *appsv1.ReplicaSet, old string) {
	cur := rs.Annotations[annotationRevisionHistory]
	if cur == "" {
		rs.Annotations[annotationRevisionHistory] = old
		return
	}
	entries := strings.Split(cur, ",")
	total := len(cur) + len(old) + 1
	start := 0
	for total > revisionHistoryMaxChars && start < len(entries) {
		total -= len(entries[start]) + 1
		start++
	}
	if total <= revisionHistoryMaxChars {
		rs.Annotations[annotationRevisionHistory] = strings.Join(append(entries[start:], old), ",")
	}
}

// setDeploymentRevision sets d's revision annotation and reports whether
// it changed.
func setDeploymentRevision(d *appsv1.Deployment, rev string) bool {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	if d.Annotations[annotationRevision] == rev {
		return false
	}
	d.Annotations[annotationRevision] = rev
	return true
}

// hasProgressDeadline: progressDeadlineSeconds is set and not "never".
func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// hasHistoryLimit: revisionHistoryLimit is set and not "keep all".
func hasHistoryLimit(d *appsv1.Deployment) bool {
	return d.Spec.RevisionHistoryLimit != nil && *d.Spec.RevisionHistoryLimit != math.MaxInt32
}
