package resourcequota

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
)

var podsResource = schema.GroupResource{Resource: "pods"}

// podNames are the fixed names the pod evaluator measures; hugepages and
// extended resources (requests.<name>) are matched by prefix.
var podNames = []corev1.ResourceName{
	objectCountName(podsResource),
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods,
}

// deviceClassRequestPrefix names quota on DRA extended resources backed by
// a device class: requests.deviceclass.resource.kubernetes.io/<class>.
const deviceClassPrefix = "deviceclass.resource.kubernetes.io/"

// isNativeResource: unprefixed names and names in *kubernetes.io/.
func isNativeResource(name corev1.ResourceName) bool {
	s := string(name)
	return !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix)
}

// isExtendedQuotaName reports whether name is quota on an extended resource
// request: requests.<non-native name> or requests.deviceclass....
func isExtendedQuotaName(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return !isNativeResource(name) ||
		strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix+deviceClassPrefix)
}

// isExtendedResource reports whether a container may request name as an
// extended resource (or through a device class), so that its request is
// quota'd as requests.<name>.
func isExtendedResource(name corev1.ResourceName) bool {
	s := string(name)
	if strings.HasPrefix(s, deviceClassPrefix) {
		return true
	}
	if isNativeResource(name) || strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}

func podMatching(in []corev1.ResourceName) []corev1.ResourceName {
	out := intersect(in, podNames)
	for _, name := range in {
		s := string(name)
		if strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) ||
			strings.HasPrefix(s, corev1.ResourceRequestsHugePagesPrefix) {
			out = append(out, name)
		}
		if isExtendedQuotaName(name) {
			out = append(out, name)
		}
	}
	return out
}

// podEvaluator measures pods: count/pods always; pods and compute
// resources only while the pod is not terminal and not past its deletion
// grace period.
func podEvaluator(list listFunc, clk clock.PassiveClock, podLevel bool) *evaluator {
	return &evaluator{
		resource: podsResource,
		list:     list,
		matching: podMatching,
		scope:    podScope(podLevel),
		usage: func(obj runtime.Object) (corev1.ResourceList, error) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return corev1.ResourceList{}, fmt.Errorf("expected a *v1.Pod, got %T", obj)
			}
			return podUsage(pod, clk, podLevel), nil
		},
	}
}

// podUsage is one pod's usage.
func podUsage(pod *corev1.Pod, clk clock.PassiveClock, podLevel bool) corev1.ResourceList {
	out := corev1.ResourceList{objectCountName(podsResource): one()}
	if !podCounts(pod, clk) {
		return out
	}
	return addLists(out, computeUsage(podRequests(pod, podLevel), podLimits(pod, podLevel)))
}

// podCounts reports whether a pod's compute resources count: not Succeeded
// or Failed, and not past its deletion grace period.
func podCounts(pod *corev1.Pod, clk clock.PassiveClock) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		end := pod.DeletionTimestamp.Add(
			time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second,
		)
		if clk.Now().After(end) {
			return false
		}
	}
	return true
}

// computeUsage maps a pod's aggregated requests and limits to quota names.
func computeUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: one()}
	for _, m := range []struct{ res, plain, req, lim corev1.ResourceName }{
		{corev1.ResourceCPU, corev1.ResourceCPU, corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU},
		{corev1.ResourceMemory, corev1.ResourceMemory, corev1.ResourceRequestsMemory,
			corev1.ResourceLimitsMemory},
		{corev1.ResourceEphemeralStorage, corev1.ResourceEphemeralStorage,
			corev1.ResourceRequestsEphemeralStorage, corev1.ResourceLimitsEphemeralStorage},
	} {
		if q, ok := requests[m.res]; ok {
			out[m.plain] = q.DeepCopy()
			out[m.req] = q.DeepCopy()
		}
		if q, ok := limits[m.res]; ok {
			out[m.lim] = q.DeepCopy()
		}
	}
	for name, q := range requests {
		if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			out[name] = q.DeepCopy()
			out[corev1.DefaultResourceRequestsPrefix+name] = q.DeepCopy()
		}
		if isExtendedResource(name) {
			out[corev1.DefaultResourceRequestsPrefix+name] = q.DeepCopy()
		}
	}
	return out
}

// podLevelSupported: the resources a pod may set in spec.resources.
func podLevelSupported(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func podLevelSet(l corev1.ResourceList) bool {
	for name := range l {
		if podLevelSupported(name) {
			return true
		}
	}
	return false
}

func statusOf(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses,
		pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// resizeInfeasible: the kubelet reported the pod's resize as infeasible.
func resizeInfeasible(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodResizePending {
			return c.Reason == corev1.PodReasonInfeasible
		}
	}
	return false
}

// containerResources picks one container's resources, given its status
// (nil when unknown) and whether a resize is infeasible.
type containerResources func(c *corev1.Container, st *corev1.ContainerStatus,
	infeasible bool) corev1.ResourceList

// aggregate sums the containers' resources and raises the sum to the
// largest init-time need: a regular init container runs alone beside the
// sidecars started before it; sidecars (restartable init containers) run
// through the pod's life and add to the sum.
func aggregate(pod *corev1.Pod, pick containerResources) corev1.ResourceList {
	infeasible := resizeInfeasible(pod)
	sum := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		addInto(sum, pick(c, statusOf(pod, c.Name), infeasible))
	}
	sidecars := corev1.ResourceList{}
	initPeak := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := pick(c, statusOf(pod, c.Name), infeasible)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addInto(sum, r)
			addInto(sidecars, r)
			maxInto(initPeak, sidecars)
			continue
		}
		maxInto(initPeak, addLists(r, sidecars))
	}
	maxInto(sum, initPeak)
	return sum
}

func specRequests(c *corev1.Container, _ *corev1.ContainerStatus, _ bool) corev1.ResourceList {
	return c.Resources.Requests
}

func allocatedRequests(
	c *corev1.Container,
	st *corev1.ContainerStatus,
	infeasible bool,
) corev1.ResourceList {
	switch {
	case st != nil && st.AllocatedResources != nil:
		return st.AllocatedResources
	case infeasible:
		return nil
	}
	return c.Resources.Requests
}

func actuatedRequests(
	c *corev1.Container,
	st *corev1.ContainerStatus,
	infeasible bool,
) corev1.ResourceList {
	switch {
	case st != nil && st.Resources != nil && st.Resources.Requests != nil:
		return st.Resources.Requests
	case st != nil && st.AllocatedResources != nil:
		return st.AllocatedResources
	case infeasible:
		return nil
	}
	return c.Resources.Requests
}

func specLimits(c *corev1.Container, _ *corev1.ContainerStatus, _ bool) corev1.ResourceList {
	return c.Resources.Limits
}

func actuatedLimits(
	c *corev1.Container,
	st *corev1.ContainerStatus,
	infeasible bool,
) corev1.ResourceList {
	switch {
	case st != nil && st.Resources != nil && st.Resources.Limits != nil:
		return st.Resources.Limits
	case infeasible:
		return nil
	}
	return c.Resources.Limits
}

// podRequests is what the pod requests: the larger of what its spec asks
// and what the kubelet allocated or actuated (in-place resize), pod-level
// resources overriding the containers' sum, plus the pod overhead.
func podRequests(pod *corev1.Pod, podLevel bool) corev1.ResourceList {
	var reqs corev1.ResourceList
	if resizeInfeasible(pod) {
		reqs = maxLists(aggregate(pod, actuatedRequests), aggregate(pod, allocatedRequests))
	} else {
		reqs = maxLists(aggregate(pod, specRequests), aggregate(pod, actuatedRequests),
			aggregate(pod, allocatedRequests))
	}
	if podLevel && pod.Spec.Resources != nil && podLevelSet(pod.Spec.Resources.Requests) {
		for name, q := range pod.Spec.Resources.Requests {
			if podLevelSupported(name) {
				reqs[name] = q.DeepCopy()
			}
		}
	}
	addInto(reqs, pod.Spec.Overhead)
	return reqs
}

// podLimits is like podRequests for limits; the overhead is added only to
// limits that are set.
func podLimits(pod *corev1.Pod, podLevel bool) corev1.ResourceList {
	var lims corev1.ResourceList
	if resizeInfeasible(pod) {
		lims = aggregate(pod, actuatedLimits)
	} else {
		lims = maxLists(aggregate(pod, specLimits), aggregate(pod, actuatedLimits))
	}
	if podLevel && pod.Spec.Resources != nil &&
		(podLevelSet(pod.Spec.Resources.Requests) || podLevelSet(pod.Spec.Resources.Limits)) {
		for name, q := range pod.Spec.Resources.Limits {
			if podLevelSupported(name) {
				lims[name] = q.DeepCopy()
			}
		}
	}
	for name, q := range pod.Spec.Overhead {
		if cur, ok := lims[name]; ok && !cur.IsZero() {
			cur.Add(q)
			lims[name] = cur
		}
	}
	return lims
}

// podInScope decides one scope requirement for a pod, with pod-level
// resources honoured.
func podInScope(req corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
	return podScope(true)(req, obj)
}

// podScope decides scope requirements for pods; podLevel tells whether
// pod-level resources decide a pod's QoS class (gate PodLevelResources).
func podScope(podLevel bool) scopeFunc {
	return func(req corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
		return podMatchesScope(req, obj, podLevel)
	}
}

func podMatchesScope(
	req corev1.ScopedResourceSelectorRequirement,
	obj runtime.Object,
	podLevel bool,
) (bool, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return false, fmt.Errorf("expected a *v1.Pod, got %T", obj)
	}
	switch req.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return podTerminating(pod), nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !podTerminating(pod), nil
	case corev1.ResourceQuotaScopeBestEffort:
		return podBestEffort(pod, podLevel), nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !podBestEffort(pod, podLevel), nil
	case corev1.ResourceQuotaScopePriorityClass:
		if req.Operator == corev1.ScopeSelectorOpExists {
			return pod.Spec.PriorityClassName != "", nil
		}
		sel, err := scopeSelector(req)
		if err != nil {
			return false, fmt.Errorf("failed to parse and convert selector: %w", err)
		}
		var set labels.Set
		if pod.Spec.PriorityClassName != "" {
			set = labels.Set{
				string(corev1.ResourceQuotaScopePriorityClass): pod.Spec.PriorityClassName,
			}
		}
		return sel.Matches(set), nil
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(pod), nil
	}
	return false, nil
}

// podTerminating: the pod has an activeDeadlineSeconds.
func podTerminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

// podBestEffort: the pod's QoS class (as reported, else computed) is
// BestEffort. With pod-level resources set (and honoured), they alone
// decide.
func podBestEffort(pod *corev1.Pod, podLevel bool) bool {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass == corev1.PodQOSBestEffort
	}
	if r := pod.Spec.Resources; podLevel && r != nil &&
		(podLevelSet(r.Requests) || podLevelSet(r.Limits)) {
		return requirementsBestEffort(r)
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if !requirementsBestEffort(&list[i].Resources) {
				return false
			}
		}
	}
	return true
}

// requirementsBestEffort: no cpu or memory requested or limited.
func requirementsBestEffort(r *corev1.ResourceRequirements) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := r.Requests[name], r.Limits[name]
		if !req.IsZero() || !lim.IsZero() {
			return false
		}
	}
	return true
}

func crossNamespaceTerm(t *corev1.PodAffinityTerm) bool {
	return len(t.Namespaces) != 0 || t.NamespaceSelector != nil
}

// crossNamespaceAffinity: some pod (anti-)affinity term names other
// namespaces or a namespace selector.
func crossNamespaceAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	check := func(req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm) bool {
		for i := range req {
			if crossNamespaceTerm(&req[i]) {
				return true
			}
		}
		for i := range pref {
			if crossNamespaceTerm(&pref[i].PodAffinityTerm) {
				return true
			}
		}
		return false
	}
	if p := a.PodAffinity; p != nil &&
		check(
			p.RequiredDuringSchedulingIgnoredDuringExecution,
			p.PreferredDuringSchedulingIgnoredDuringExecution,
		) {
		return true
	}
	if p := a.PodAntiAffinity; p != nil &&
		check(
			p.RequiredDuringSchedulingIgnoredDuringExecution,
			p.PreferredDuringSchedulingIgnoredDuringExecution,
		) {
		return true
	}
	return false
}
