package hpa

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"
)

// tolerances bound the usage ratio within which nothing scales.
type tolerances struct{ down, up float64 }

func (t tolerances) String() string {
	return fmt.Sprintf("[down:%.1f%%, up:%.1f%%]", t.down*100, t.up*100)
}

func (t tolerances) within(ratio float64) bool {
	return 1.0-t.down <= ratio && ratio <= 1.0+t.up
}

var (
	errNoPods = errors.New("no pods returned by selector while calculating replica count")
	errNoData = errors.New("did not receive metrics for targeted pods (pods might be unready)")
)

// calculator turns metrics into replica counts, as KCM's replica
// calculator does.
type calculator struct {
	metrics          metricsSource
	pods             corelisters.PodLister
	clock            clock.PassiveClock
	cpuInitPeriod    time.Duration
	readinessDelay   time.Duration
	podLevelRequests bool
}

func (c *calculator) list(namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	list, err := c.pods.Pods(namespace).List(selector)
	if err != nil {
		return nil, fmt.Errorf("unable to get pods while calculating replica count: %w", err)
	}
	if len(list) == 0 {
		return nil, errNoPods
	}
	return list, nil
}

// podGroups sorts pods by how their samples count.
type podGroups struct {
	ready                     int
	unready, missing, ignored map[string]bool
}

// group sorts pods: deleted and failed ones are ignored; pending ones,
// and for CPU ones not ready or still starting, are unready; ones without
// a sample are missing; the rest are ready.
func (c *calculator) group(list []*corev1.Pod, metrics podMetrics,
	res corev1.ResourceName) podGroups {
	g := podGroups{unready: map[string]bool{}, missing: map[string]bool{},
		ignored: map[string]bool{}}
	now := c.clock.Now()
	for _, p := range list {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed {
			g.ignored[p.Name] = true
			continue
		}
		if p.Status.Phase == corev1.PodPending {
			g.unready[p.Name] = true
			continue
		}
		m, ok := metrics[p.Name]
		if !ok {
			g.missing[p.Name] = true
			continue
		}
		if res == corev1.ResourceCPU && cpuUnready(p, m, now, c.cpuInitPeriod, c.readinessDelay) {
			g.unready[p.Name] = true
			continue
		}
		g.ready++
	}
	return g
}

// cpuUnready: a CPU sample is skipped when the pod has no Ready condition
// or start time; within the initialization period, when the pod is not
// ready or the sample's window began before it turned ready; after it,
// when the pod is not ready and has not been since it started.
func cpuUnready(p *corev1.Pod, m podMetric, now time.Time, initPeriod,
	readinessDelay time.Duration) bool {
	var ready *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			ready = &p.Status.Conditions[i]
			break
		}
	}
	if ready == nil || p.Status.StartTime == nil {
		return true
	}
	start := p.Status.StartTime.Time
	if start.Add(initPeriod).After(now) {
		return ready.Status == corev1.ConditionFalse ||
			m.timestamp.Before(ready.LastTransitionTime.Add(m.window))
	}
	return ready.Status == corev1.ConditionFalse &&
		start.Add(readinessDelay).After(ready.LastTransitionTime.Time)
}

func dropSamples(metrics podMetrics, names map[string]bool) {
	for n := range names {
		delete(metrics, n)
	}
}

// resourceReplicas proposes a count for a utilization target (percent of
// request), and returns the utilization and the average usage.
func (c *calculator) resourceReplicas(ctx context.Context, current, target int32,
	res corev1.ResourceName, tol tolerances, namespace string, selector labels.Selector,
	container string) (int32, int32, int64, time.Time, error) {
	metrics, ts, err := c.metrics.resource(ctx, res, namespace, selector, container)
	if err != nil {
		return 0, 0, 0, time.Time{}, fmt.Errorf("unable to get metrics for resource %s: %w",
			res, err)
	}
	list, err := c.list(namespace, selector)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	g := c.group(list, metrics, res)
	dropSamples(metrics, g.ignored)
	dropSamples(metrics, g.unready)
	if len(metrics) == 0 {
		return 0, 0, 0, time.Time{}, errNoData
	}
	requests, err := c.requests(list, container, res)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	ratio, util, raw, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	upWithUnready := len(g.unready) > 0 && ratio > 1.0
	if !upWithUnready && len(g.missing) == 0 {
		if tol.within(ratio) {
			return current, util, raw, ts, nil
		}
		return int32(math.Ceil(ratio * float64(g.ready))), util, raw, ts, nil
	}
	if len(g.missing) > 0 {
		switch {
		case ratio < 1.0:
			// Scaling down: a pod without a sample counts as using its
			// whole request, or the target when that is above 100%.
			fallback := int64(max(100, target))
			for n := range g.missing {
				metrics[n] = podMetric{value: requests[n] * fallback / 100}
			}
		case ratio > 1.0:
			for n := range g.missing {
				metrics[n] = podMetric{}
			}
		}
	}
	if upWithUnready {
		for n := range g.unready {
			metrics[n] = podMetric{}
		}
	}
	newRatio, _, _, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, util, raw, time.Time{}, err
	}
	n, ok := rerun(current, ratio, newRatio, len(metrics), tol)
	if !ok {
		return current, util, raw, ts, nil
	}
	return n, util, raw, ts, nil
}

// rerun is the count from the ratio recomputed with missing and unready
// pods filled in; false when it is within tolerance or would turn the
// direction of the scale.
func rerun(current int32, ratio, newRatio float64, samples int,
	tol tolerances) (int32, bool) {
	if tol.within(newRatio) || (ratio < 1.0 && newRatio > 1.0) ||
		(ratio > 1.0 && newRatio < 1.0) {
		return current, false
	}
	n := int32(math.Ceil(newRatio * float64(samples)))
	if (newRatio < 1.0 && n > current) || (newRatio > 1.0 && n < current) {
		return current, false
	}
	return n, true
}

// rawResourceReplicas proposes a count for an average usage target.
func (c *calculator) rawResourceReplicas(ctx context.Context, current int32, target int64,
	res corev1.ResourceName, tol tolerances, namespace string, selector labels.Selector,
	container string) (int32, int64, time.Time, error) {
	metrics, ts, err := c.metrics.resource(ctx, res, namespace, selector, container)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metrics for resource %s: %w",
			res, err)
	}
	n, usage, err := c.plainReplicas(metrics, current, target, tol, namespace, selector, res)
	return n, usage, ts, err
}

// podsMetricReplicas proposes a count for a custom per-pod metric.
func (c *calculator) podsMetricReplicas(ctx context.Context, current int32, target int64,
	metric string, tol tolerances, namespace string, selector,
	metricSelector labels.Selector) (int32, int64, time.Time, error) {
	metrics, ts, err := c.metrics.pods(ctx, metric, namespace, selector, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metric %s: %w", metric, err)
	}
	n, usage, err := c.plainReplicas(metrics, current, target, tol, namespace, selector, "")
	return n, usage, ts, err
}

// plainReplicas is resourceReplicas for averages rather than percentages.
func (c *calculator) plainReplicas(metrics podMetrics, current int32, target int64,
	tol tolerances, namespace string, selector labels.Selector,
	res corev1.ResourceName) (int32, int64, error) {
	list, err := c.list(namespace, selector)
	if err != nil {
		return 0, 0, err
	}
	g := c.group(list, metrics, res)
	dropSamples(metrics, g.ignored)
	dropSamples(metrics, g.unready)
	if len(metrics) == 0 {
		return 0, 0, errNoData
	}
	ratio, usage := usageRatio(metrics, target)
	upWithUnready := len(g.unready) > 0 && ratio > 1.0
	if !upWithUnready && len(g.missing) == 0 {
		if tol.within(ratio) {
			return current, usage, nil
		}
		return int32(math.Ceil(ratio * float64(g.ready))), usage, nil
	}
	if len(g.missing) > 0 {
		switch {
		case ratio < 1.0:
			for n := range g.missing {
				metrics[n] = podMetric{value: target}
			}
		case ratio > 1.0:
			for n := range g.missing {
				metrics[n] = podMetric{}
			}
		}
	}
	if upWithUnready {
		for n := range g.unready {
			metrics[n] = podMetric{}
		}
	}
	newRatio, _ := usageRatio(metrics, target)
	n, ok := rerun(current, ratio, newRatio, len(metrics), tol)
	if !ok {
		return current, usage, nil
	}
	return n, usage, nil
}

// objectReplicas proposes a count for an object metric's value target.
func (c *calculator) objectReplicas(ctx context.Context, current int32, target int64,
	metric string, tol tolerances, namespace string,
	ref *autoscalingv2.CrossVersionObjectReference, selector,
	metricSelector labels.Selector) (int32, int64, time.Time, error) {
	usage, _, err := c.metrics.object(ctx, metric, namespace, ref, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metric %s on %s %s/%s: %w",
			metric, ref.Kind, namespace, ref.Name, err)
	}
	n, ts, err := c.ratioReplicas(current, float64(usage)/float64(target), tol, namespace,
		selector)
	return n, usage, ts, err
}

// ratioReplicas scales the ready pods by ratio; from zero replicas it
// takes the ratio itself, tolerance aside, so that a workload at zero can
// come back. The time is always zero, as in KCM.
func (c *calculator) ratioReplicas(current int32, ratio float64, tol tolerances,
	namespace string, selector labels.Selector) (int32, time.Time, error) {
	if current == 0 {
		return int32(math.Ceil(ratio)), time.Time{}, nil
	}
	if tol.within(ratio) {
		return current, time.Time{}, nil
	}
	ready, err := c.readyCount(namespace, selector)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("unable to calculate ready pods: %s", err)
	}
	f := ratio * float64(ready)
	if f > math.MaxInt32 {
		return math.MaxInt32, time.Time{}, nil
	}
	return int32(math.Ceil(f)), time.Time{}, nil
}

func (c *calculator) readyCount(namespace string, selector labels.Selector) (int64, error) {
	list, err := c.list(namespace, selector)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range list {
		if p.Status.Phase == corev1.PodRunning && podReady(p) {
			n++
		}
	}
	return n, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// objectPerPodReplicas proposes a count for an object metric's average
// value target, over the scale's status replicas.
func (c *calculator) objectPerPodReplicas(ctx context.Context, statusReplicas int32,
	target int64, metric string, tol tolerances, namespace string,
	ref *autoscalingv2.CrossVersionObjectReference,
	metricSelector labels.Selector) (int32, int64, time.Time, error) {
	usage, ts, err := c.metrics.object(ctx, metric, namespace, ref, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metric %s on %s %s/%s: %w",
			metric, ref.Kind, namespace, ref.Name, err)
	}
	n := statusReplicas
	if !tol.within(float64(usage) / (float64(target) * float64(n))) {
		n = int32(math.Ceil(float64(usage) / float64(target)))
	}
	return n, int64(math.Ceil(float64(usage) / float64(statusReplicas))), ts, nil
}

// externalReplicas proposes a count for an external metric's value
// target: the sum of its values against the target.
func (c *calculator) externalReplicas(ctx context.Context, current int32, target int64,
	metric string, tol tolerances, namespace string, metricSelector *metav1.LabelSelector,
	selector labels.Selector) (int32, int64, time.Time, error) {
	sel, err := metav1.LabelSelectorAsSelector(metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	values, _, err := c.metrics.external(ctx, metric, namespace, sel)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get external metric %s/%s/%+v: %s",
			namespace, metric, metricSelector, err)
	}
	var usage int64
	for _, v := range values {
		if v > 0 && usage > math.MaxInt64-v {
			usage = math.MaxInt64
			break
		}
		usage += v
	}
	n, ts, err := c.ratioReplicas(current, float64(usage)/float64(target), tol, namespace,
		selector)
	return n, usage, ts, err
}

// externalPerPodReplicas proposes a count for an external metric's
// average value target, over the scale's status replicas.
func (c *calculator) externalPerPodReplicas(ctx context.Context, statusReplicas int32,
	target int64, metric string, tol tolerances, namespace string,
	metricSelector *metav1.LabelSelector) (int32, int64, time.Time, error) {
	sel, err := metav1.LabelSelectorAsSelector(metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	values, ts, err := c.metrics.external(ctx, metric, namespace, sel)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get external metric %s/%s/%+v: %s",
			namespace, metric, metricSelector, err)
	}
	var usage int64
	for _, v := range values {
		usage += v
		if usage < 0 {
			usage = math.MaxInt64
			break
		}
	}
	n := statusReplicas
	if !tol.within(float64(usage) / (float64(target) * float64(n))) {
		f := math.Ceil(float64(usage) / float64(target))
		if f > float64(math.MaxInt32) {
			n = math.MaxInt32
		} else {
			n = int32(f)
		}
	}
	if float64(usage) >= float64(math.MaxInt64) {
		usage = math.MaxInt64
	} else {
		usage = int64(math.Ceil(float64(usage) / float64(statusReplicas)))
	}
	return n, usage, ts, nil
}

// requests returns each pod's request of res: the named container's, or
// the pod-level request when the pod sets one (and the gate is on), or
// the sum over its containers and sidecars.
func (c *calculator) requests(list []*corev1.Pod, container string,
	res corev1.ResourceName) (map[string]int64, error) {
	out := make(map[string]int64, len(list))
	for _, p := range list {
		if c.podLevelRequests && container == "" && podLevelRequestsSet(p) {
			q, ok := podRequest(p, res)
			if !ok {
				return nil, fmt.Errorf("missing pod-level request for %s in Pod %s", res, p.Name)
			}
			out[p.Name] = q.MilliValue()
			continue
		}
		r, err := containerRequests(p, container, res)
		if err != nil {
			return nil, err
		}
		out[p.Name] = r
	}
	return out, nil
}

func containerRequests(p *corev1.Pod, container string, res corev1.ResourceName) (int64,
	error) {
	cs := append([]corev1.Container{}, p.Spec.Containers...)
	for _, ic := range p.Spec.InitContainers {
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			cs = append(cs, ic)
		}
	}
	var sum int64
	for _, ct := range cs {
		if container != "" && container != ct.Name {
			continue
		}
		q, ok := ct.Resources.Requests[res]
		if !ok {
			return 0, fmt.Errorf("missing request for %s in container %s of Pod %s", res,
				ct.Name, p.Name)
		}
		sum += q.MilliValue()
		if container != "" {
			return sum, nil
		}
	}
	if container != "" {
		return 0, fmt.Errorf("container %s not found in Pod %s", container, p.Name)
	}
	return sum, nil
}

// utilizationRatio is the usage over the requests of the pods with a
// sample, as a percentage, against the target; and the average usage.
func utilizationRatio(metrics podMetrics, requests map[string]int64,
	target int32) (float64, int32, int64, error) {
	var usage, requested int64
	n := 0
	for name, m := range metrics {
		r, ok := requests[name]
		if !ok {
			continue
		}
		usage += m.value
		requested += r
		n++
	}
	if requested == 0 {
		return 0, 0, 0, errors.New("no metrics returned matched known pods")
	}
	util := int32(usage * 100 / requested)
	return float64(util) / float64(target), util, usage / int64(n), nil
}

// usageRatio is the average usage against the target, and the average.
func usageRatio(metrics podMetrics, target int64) (float64, int64) {
	var total int64
	for _, m := range metrics {
		total += m.value
	}
	avg := total / int64(len(metrics))
	return float64(avg) / float64(target), avg
}

// podLevelResource: the resources a pod-level request may set (as
// component-helpers' IsSupportedPodLevelResource says).
func podLevelResource(res corev1.ResourceName) bool {
	return res == corev1.ResourceCPU || res == corev1.ResourceMemory ||
		strings.HasPrefix(string(res), corev1.ResourceHugePagesPrefix)
}

// podLevelRequestsSet: the pod sets a pod-level request of a resource
// that may have one.
func podLevelRequestsSet(p *corev1.Pod) bool {
	if p.Spec.Resources == nil {
		return false
	}
	for res := range p.Spec.Resources.Requests {
		if podLevelResource(res) {
			return true
		}
	}
	return false
}

// podRequest is a pod's request of res as the scheduler counts it (what
// component-helpers' PodRequests gives for it, with no option): its
// pod-level request, else its containers' (the regular ones and the
// sidecars, or the largest init container with the sidecars started
// before it, whichever is more); plus its overhead. False when nothing
// requests res.
func podRequest(p *corev1.Pod, res corev1.ResourceName) (resource.Quantity, bool) {
	var total resource.Quantity
	ok := false
	if p.Spec.Resources != nil {
		total, ok = p.Spec.Resources.Requests[res]
	}
	if ok && podLevelResource(res) {
		total = total.DeepCopy()
	} else {
		total, ok = containersRequest(p, res)
	}
	if q, has := p.Spec.Overhead[res]; has {
		total.Add(q)
		ok = true
	}
	return total, ok
}

// containersRequest sums the containers' requests of res as
// component-helpers aggregates them.
func containersRequest(p *corev1.Pod, res corev1.ResourceName) (resource.Quantity, bool) {
	var sum, sidecars, initPeak resource.Quantity
	var inSum, inSidecars, inInit bool
	for _, c := range p.Spec.Containers {
		if q, has := c.Resources.Requests[res]; has {
			sum.Add(q)
			inSum = true
		}
	}
	for _, c := range p.Spec.InitContainers {
		q, has := c.Resources.Requests[res]
		var cur resource.Quantity
		present := false
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			if has {
				sum.Add(q)
				sidecars.Add(q)
				inSum, inSidecars = true, true
			}
			cur, present = sidecars.DeepCopy(), inSidecars
		} else {
			if has {
				cur.Add(q)
			}
			if inSidecars {
				cur.Add(sidecars)
			}
			present = has || inSidecars
		}
		if present && (!inInit || cur.Cmp(initPeak) > 0) {
			initPeak, inInit = cur, true
		}
	}
	if inInit && (!inSum || initPeak.Cmp(sum) > 0) {
		return initPeak, true
	}
	return sum, inSum
}
