package disruption

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
)

// sync brings one budget's status up to date. A failure other than a
// conflict writes the fail-safe status instead (no disruption allowed,
// DisruptionAllowed False with reason SyncFailed) and, as in KCM, is not
// retried once that write succeeded: the budget's next event syncs it.
func (c *controller) sync(ctx context.Context, k string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(k)
	if err != nil {
		return err
	}
	pdb, err := c.pdbs.PodDisruptionBudgets(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	err = c.trySync(ctx, pdb)
	if err == nil || apierrors.IsConflict(err) {
		return err
	}
	c.log.Error(err, "Failed to sync PDB", "podDisruptionBudget", k)
	return c.failSafe(ctx, pdb, err)
}

func (c *controller) trySync(ctx context.Context, pdb *policyv1.PodDisruptionBudget) error {
	pods, err := c.podsOf(pdb)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return err
	}
	if len(pods) == 0 {
		c.recorder.Eventf(pdb, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	expected, desired, unmanaged, err := c.expectedCount(ctx, pdb, pods)
	if err != nil {
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed",
			"Failed to calculate the number of expected pods: %v", err)
		return err
	}
	if len(unmanaged) > 0 {
		c.log.V(4).Info("Found unmanaged pods associated with this PDB", "pods", unmanaged)
		c.recorder.Eventf(pdb, corev1.EventTypeWarning, "UnmanagedPods",
			"Pods selected by this PodDisruptionBudget (selector: %v) were found to be "+
				"unmanaged. As a result, the status of the PDB cannot be calculated correctly, "+
				"which may result in undefined behavior. To account for these pods please set "+
				"\".spec.minAvailable\" field of the PDB to an integer value.", pdb.Spec.Selector)
	}
	now := c.clock.Now()
	disrupted, recheck := c.disruptedPods(pods, pdb, now)
	healthy := countHealthy(pods, disrupted, now)
	if err := c.writeStatus(ctx, pdb, healthy, desired, expected, disrupted); err != nil {
		return err
	}
	if recheck != nil {
		// The queue keeps the earliest of the times a key is added for.
		c.recheck(key(pdb), recheck.Sub(now))
	}
	return nil
}

// podsOf lists the pods of the budget's namespace its selector matches.
func (c *controller) podsOf(pdb *policyv1.PodDisruptionBudget) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return nil, err
	}
	return c.pods.Pods(pdb.Namespace).List(sel)
}

// expectedCount is KCM's: an integer minAvailable counts the selected
// pods and wants that many healthy; a percentage minAvailable or any
// maxUnavailable counts the sum of the pods' controllers' scales, and pods
// without a controller are returned as unmanaged.
func (c *controller) expectedCount(ctx context.Context, pdb *policyv1.PodDisruptionBudget,
	pods []*corev1.Pod) (expected, desired int32, unmanaged []string, err error) {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		expected, unmanaged, err = c.expectedScale(ctx, pods)
		if err != nil {
			return 0, 0, unmanaged, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable,
			int(expected), true)
		if err != nil {
			return 0, 0, unmanaged, err
		}
		return expected, max(expected-int32(maxUnavailable), 0), unmanaged, nil
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		return int32(len(pods)), pdb.Spec.MinAvailable.IntVal, nil, nil
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.String:
		expected, unmanaged, err = c.expectedScale(ctx, pods)
		if err != nil {
			return 0, 0, unmanaged, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable,
			int(expected), true)
		if err != nil {
			return 0, 0, unmanaged, err
		}
		return expected, int32(minAvailable), unmanaged, nil
	}
	return 0, 0, nil, nil
}

// expectedScale sums the scales of the pods' controllers, each counted
// once. A pod without a controller reference is unmanaged; a pod whose
// controller none of the finders knows is an error.
func (c *controller) expectedScale(ctx context.Context,
	pods []*corev1.Pod) (int32, []string, error) {
	scales := map[types.UID]int32{}
	var unmanaged []string
	for _, pod := range pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil {
			unmanaged = append(unmanaged, pod.Name)
			continue
		}
		if _, ok := scales[ref.UID]; ok {
			continue
		}
		found := false
		for _, find := range c.finders() {
			cs, err := find(ctx, ref, pod.Namespace)
			if err != nil {
				return 0, unmanaged, err
			}
			if cs != nil {
				scales[cs.uid] = cs.scale
				found = true
				break
			}
		}
		if !found {
			return 0, unmanaged, fmt.Errorf("found no controllers for pod %q", pod.Name)
		}
	}
	var sum int32
	for _, n := range scales {
		sum += n
	}
	return sum, unmanaged, nil
}

// controllerScale is a controller found for a pod, and its size.
type controllerScale struct {
	uid   types.UID
	scale int32
}

type finder func(ctx context.Context, ref *metav1.OwnerReference,
	ns string) (*controllerScale, error)

// finders are tried in KCM's order: the four kinds read from the cache,
// then any kind through its scale subresource.
func (c *controller) finders() []finder {
	return []finder{c.findRC, c.findDeployment, c.findReplicaSet, c.findStatefulSet,
		c.findByScale}
}

// isKind reports whether ref names kind in one of groups; an unparsable
// apiVersion is an error.
func isKind(ref *metav1.OwnerReference, kind string, groups ...string) (bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false, err
	}
	return ref.Kind == kind && slices.Contains(groups, gv.Group), nil
}

func (c *controller) findRC(_ context.Context, ref *metav1.OwnerReference,
	ns string) (*controllerScale, error) {
	if ok, err := isKind(ref, "ReplicationController", ""); !ok || err != nil {
		return nil, err
	}
	rc, err := c.rcs.ReplicationControllers(ns).Get(ref.Name)
	if err != nil || rc.UID != ref.UID {
		return nil, nil // only NotFound: not this finder's
	}
	return &controllerScale{rc.UID, replicas(rc.Spec.Replicas)}, nil
}

// findDeployment finds the Deployment controlling the pod's ReplicaSet.
func (c *controller) findDeployment(_ context.Context, ref *metav1.OwnerReference,
	ns string) (*controllerScale, error) {
	if ok, err := isKind(ref, "ReplicaSet", "apps", "extensions"); !ok || err != nil {
		return nil, err
	}
	rs, err := c.rss.ReplicaSets(ns).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil, nil
	}
	dref := metav1.GetControllerOfNoCopy(rs)
	if dref == nil {
		return nil, nil
	}
	if ok, err := isKind(dref, "Deployment", "apps", "extensions"); !ok || err != nil {
		return nil, err
	}
	d, err := c.deployments.Deployments(ns).Get(dref.Name)
	if err != nil || d.UID != dref.UID {
		return nil, nil
	}
	return &controllerScale{d.UID, replicas(d.Spec.Replicas)}, nil
}

// findReplicaSet finds a ReplicaSet that no Deployment controls.
func (c *controller) findReplicaSet(_ context.Context, ref *metav1.OwnerReference,
	ns string) (*controllerScale, error) {
	if ok, err := isKind(ref, "ReplicaSet", "apps", "extensions"); !ok || err != nil {
		return nil, err
	}
	rs, err := c.rss.ReplicaSets(ns).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil, nil
	}
	if owner := metav1.GetControllerOfNoCopy(rs); owner != nil && owner.Kind == "Deployment" {
		return nil, nil
	}
	return &controllerScale{rs.UID, replicas(rs.Spec.Replicas)}, nil
}

func (c *controller) findStatefulSet(_ context.Context, ref *metav1.OwnerReference,
	ns string) (*controllerScale, error) {
	if ok, err := isKind(ref, "StatefulSet", "apps"); !ok || err != nil {
		return nil, err
	}
	ss, err := c.statefulSets.StatefulSets(ns).Get(ref.Name)
	if err != nil || ss.UID != ref.UID {
		return nil, nil
	}
	return &controllerScale{ss.UID, replicas(ss.Spec.Replicas)}, nil
}

// findByScale reads the controller's scale subresource, its resource found
// through the REST mapper. A controller that is gone is not found; a kind
// without a scale subresource is an error.
func (c *controller) findByScale(ctx context.Context, ref *metav1.OwnerReference,
	ns string) (*controllerScale, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, err
	}
	if c.mapper == nil {
		return nil, fmt.Errorf("no REST mapper to find the resource of %s", ref.Kind)
	}
	mapping, err := c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind},
		gv.Version)
	if err != nil {
		return nil, err
	}
	gr := mapping.Resource.GroupResource()
	s, err := c.scales.Scales(ns).Get(ctx, gr, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Either the object is gone or its resource has no scale subresource.
		has, err := c.hasScale(mapping.Resource)
		if err != nil {
			return nil, err
		}
		if !has {
			return nil, fmt.Errorf("%s does not implement the scale subresource", gr.String())
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if s.UID != ref.UID {
		return nil, nil
	}
	return &controllerScale{s.UID, s.Spec.Replicas}, nil
}

// hasScale asks discovery whether gvr serves a scale subresource of a kind
// the scale client reads.
func (c *controller) hasScale(gvr schema.GroupVersionResource) (bool, error) {
	if c.discovery == nil {
		return false, fmt.Errorf("no discovery client to look up %s/scale", gvr.Resource)
	}
	list, err := c.discovery.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false, err
	}
	versions := scale.NewScaleConverter().ScaleVersions()
	for _, r := range list.APIResources {
		if r.Name != gvr.Resource+"/scale" || r.Kind != "Scale" {
			continue
		}
		if slices.Contains(versions, schema.GroupVersion{Group: r.Group, Version: r.Version}) {
			return true, nil
		}
	}
	return false, nil
}

func replicas(n *int32) int32 {
	if n == nil {
		return 0 // the API server defaults it; a nil here is a bare fixture
	}
	return *n
}

// countHealthy counts the ready pods that are neither being deleted nor
// admitted for disruption within DeletionTimeout.
func countHealthy(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if t, ok := disrupted[pod.Name]; ok && t.Add(DeletionTimeout).After(now) {
			continue
		}
		if podstate.IsReady(pod) {
			n++
		}
	}
	return n
}

// disruptedPods keeps the status's disruptedPods entries of selected pods
// not yet being deleted whose DeletionTimeout has not passed, and returns
// when the earliest of those passes (nil: none left). An entry whose
// timeout passed gets a NotDeleted warning on its pod.
func (c *controller) disruptedPods(pods []*corev1.Pod, pdb *policyv1.PodDisruptionBudget,
	now time.Time) (map[string]metav1.Time, *time.Time) {
	out := map[string]metav1.Time{}
	if pdb.Status.DisruptedPods == nil {
		return out, nil
	}
	var recheck *time.Time
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		t, ok := pdb.Status.DisruptedPods[pod.Name]
		if !ok {
			continue
		}
		due := t.Add(DeletionTimeout)
		if due.Before(now) {
			c.log.V(1).Info("Pod was expected to be deleted but it was not, updating PDB",
				"pod", key(pod), "deletionTime", t, "podDisruptionBudget", key(pdb))
			// KCM's message names the budget's namespace twice.
			c.recorder.Eventf(pod, corev1.EventTypeWarning, "NotDeleted",
				"Pod was expected by PDB %s/%s to be deleted but it wasn't",
				pdb.Namespace, pdb.Namespace)
			continue
		}
		if recheck == nil || due.Before(*recheck) {
			recheck = &due
		}
		out[pod.Name] = t
	}
	return out, recheck
}

// writeStatus writes the status the counts make, unless the budget has it
// already (DisruptionAllowed condition included).
func (c *controller) writeStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget,
	healthy, desired, expected int32, disrupted map[string]metav1.Time) error {
	// No disruption while no pod is expected: a budget whose first pods
	// appear before its sync must not allow any.
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	st := pdb.Status
	if st.CurrentHealthy == healthy && st.DesiredHealthy == desired &&
		st.ExpectedPods == expected && st.DisruptionsAllowed == allowed &&
		sameDisrupted(st.DisruptedPods, disrupted) &&
		st.ObservedGeneration == pdb.Generation && conditionUpToDate(pdb) {
		return nil
	}
	next := pdb.DeepCopy()
	next.Status = policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy:     healthy,
		DesiredHealthy:     desired,
		ExpectedPods:       expected,
		DisruptionsAllowed: allowed,
		DisruptedPods:      disrupted,
		ObservedGeneration: pdb.Generation,
		Conditions:         next.Status.Conditions,
	}
	if next.Status.Conditions == nil {
		next.Status.Conditions = []metav1.Condition{}
	}
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition,
		Status: metav1.ConditionFalse, Reason: policyv1.InsufficientPodsReason,
		ObservedGeneration: next.Status.ObservedGeneration,
		LastTransitionTime: metav1.NewTime(c.clock.Now())}
	if allowed > 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	meta.SetStatusCondition(&next.Status.Conditions, cond)
	return c.updateStatus(ctx, next)
}

// conditionUpToDate: the budget's DisruptionAllowed condition agrees with
// its disruptionsAllowed, and its status observed its generation.
func conditionUpToDate(pdb *policyv1.PodDisruptionBudget) bool {
	cond := meta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if cond == nil || pdb.Status.ObservedGeneration != pdb.Generation {
		return false
	}
	if pdb.Status.DisruptionsAllowed > 0 {
		return cond.Status == metav1.ConditionTrue && cond.Reason == policyv1.SufficientPodsReason
	}
	return cond.Status == metav1.ConditionFalse && cond.Reason == policyv1.InsufficientPodsReason
}

// sameDisrupted compares two disruptedPods maps, nil equal to empty.
func sameDisrupted(a, b map[string]metav1.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for name, t := range a {
		u, ok := b[name]
		if !ok || !t.Equal(&u) {
			return false
		}
	}
	return true
}

// failSafe writes "no disruption allowed" with DisruptionAllowed False,
// reason SyncFailed and the error as message, keeping the rest of the
// status: the eviction API then refuses evictions the budget covers.
func (c *controller) failSafe(ctx context.Context, pdb *policyv1.PodDisruptionBudget,
	cause error) error {
	next := pdb.DeepCopy()
	next.Status.DisruptionsAllowed = 0
	if next.Status.Conditions == nil {
		next.Status.Conditions = []metav1.Condition{}
	}
	meta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{
		Type:               policyv1.DisruptionAllowedCondition,
		Status:             metav1.ConditionFalse,
		Reason:             policyv1.SyncFailedReason,
		Message:            cause.Error(),
		ObservedGeneration: next.Status.ObservedGeneration,
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
	})
	return c.updateStatus(ctx, next)
}

// updateStatus writes next's status; the loop holds the budget's key until
// the informer delivers what was written.
func (c *controller) updateStatus(ctx context.Context, next *policyv1.PodDisruptionBudget) error {
	got, err := c.client.PolicyV1().PodDisruptionBudgets(next.Namespace).UpdateStatus(ctx, next,
		metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	c.loop.Wrote(key(next), got)
	return nil
}
