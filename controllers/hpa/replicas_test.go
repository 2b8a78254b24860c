package hpa

import (
	"fmt"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

func pending(name string) *corev1.Pod {
	p := runningPod(name, 100)
	p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	return p
}

// startedAgo is a running pod started d ago whose readiness is ready,
// turned so at the start.
func startedAgo(name string, d time.Duration, ready corev1.ConditionStatus) *corev1.Pod {
	p := runningPod(name, 100)
	at := metav1.NewTime(t0.Add(-d))
	p.Status.StartTime = &at
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready,
		LastTransitionTime: at}}
	return p
}

func newCalculator(t *testing.T, m *fakeMetrics, pods ...*corev1.Pod) *calculator {
	pods = controllertest.Pruned(t, Descriptor(NewOptions()), pods...)
	return &calculator{metrics: m,
		pods:          corelisters.NewPodLister(controllertest.NamespacedIndexer(t, pods...)),
		clock:         clocktesting.NewFakeClock(t0),
		cpuInitPeriod: defaultCPUInitializationPeriod, readinessDelay: defaultInitialReadinessDelay,
		podLevelRequests: true}
}

var defaultTolerance = tolerances{0.1, 0.1}

func TestResourceReplicas(t *testing.T) {
	deleted := runningPod("gone", 100)
	deleted.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	failed := runningPod("failed", 100)
	failed.Status.Phase = corev1.PodFailed
	sidecar := runningPod("side", 100)
	sidecar.Spec.InitContainers = []corev1.Container{{Name: "s",
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100m")}}}}
	podLevel := runningPod("pl", 100)
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("400m")}}
	noRequest := runningPod("nr", 100)
	noRequest.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	tests := []struct {
		name     string
		pods     []*corev1.Pod
		cpu      map[string]int64
		current  int32
		target   int32
		want     int32
		wantUtil int32
		wantErr  string
	}{
		{name: "scale down", pods: []*corev1.Pod{runningPod("a", 100), runningPod("b", 100),
			runningPod("c", 100)}, cpu: map[string]int64{"a": 30, "b": 30, "c": 30},
			current: 3, target: 50, want: 2, wantUtil: 30},
		{name: "within tolerance", pods: []*corev1.Pod{runningPod("a", 100),
			runningPod("b", 100)}, cpu: map[string]int64{"a": 54, "b": 54},
			current: 2, target: 50, want: 2, wantUtil: 54},
		{name: "scale up: a pending pod counts as using nothing",
			pods: []*corev1.Pod{runningPod("a", 100), runningPod("b", 100), pending("c")},
			cpu:  map[string]int64{"a": 150, "b": 150, "c": 500}, current: 3, target: 50,
			want: 6, wantUtil: 150},
		{name: "scale down: a pod without a sample counts as using its request",
			pods: []*corev1.Pod{runningPod("a", 100), runningPod("b", 100),
				runningPod("c", 100), runningPod("d", 100), runningPod("e", 100)},
			cpu:     map[string]int64{"a": 10, "b": 10, "c": 10, "d": 10},
			current: 5, target: 50, want: 3, wantUtil: 10},
		{name: "a missing pod that would turn the direction: no change",
			pods: []*corev1.Pod{runningPod("a", 100), runningPod("b", 100),
				runningPod("c", 100)},
			cpu: map[string]int64{"a": 10, "b": 10}, current: 3, target: 20, want: 3,
			wantUtil: 10},
		{name: "deleted and failed pods are ignored",
			pods: []*corev1.Pod{runningPod("a", 100), deleted, failed},
			cpu:  map[string]int64{"a": 100, "gone": 900, "failed": 900}, current: 1,
			target: 50, want: 2, wantUtil: 100},
		{name: "not ready within the CPU initialization period: unready",
			pods: []*corev1.Pod{runningPod("a", 100),
				startedAgo("young", time.Minute, corev1.ConditionFalse)},
			cpu:     map[string]int64{"a": 100, "young": 900},
			current: 2, target: 50, want: 2, wantUtil: 100},
		{name: "never ready after the period, within the readiness delay: unready",
			pods: []*corev1.Pod{runningPod("a", 100),
				startedAgo("old", time.Hour, corev1.ConditionFalse)},
			cpu:     map[string]int64{"a": 100, "old": 900},
			current: 2, target: 50, want: 2, wantUtil: 100},
		{name: "sidecars' requests count", pods: []*corev1.Pod{sidecar},
			cpu: map[string]int64{"side": 100}, current: 1, target: 50, want: 1, wantUtil: 50},
		{name: "the pod-level request counts", pods: []*corev1.Pod{podLevel},
			cpu: map[string]int64{"pl": 100}, current: 1, target: 50, want: 1, wantUtil: 25},
		{name: "no pods", cpu: map[string]int64{"a": 1}, current: 1, target: 50,
			wantErr: "no pods returned by selector while calculating replica count"},
		{name: "only unready pods", pods: []*corev1.Pod{pending("a")},
			cpu: map[string]int64{"a": 1}, current: 1, target: 50,
			wantErr: "did not receive metrics for targeted pods (pods might be unready)"},
		{name: "a pod without a request", pods: []*corev1.Pod{noRequest},
			cpu: map[string]int64{"nr": 1}, current: 1, target: 50,
			wantErr: "missing request for cpu in container c of Pod nr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &fakeMetrics{cpu: tt.cpu, at: t0, window: 30 * time.Second}
			c := newCalculator(t, m, tt.pods...)
			n, util, _, _, err := c.resourceReplicas(t.Context(), tt.current, tt.target,
				corev1.ResourceCPU, defaultTolerance, ns, labels.Everything(), "")
			if fmt.Sprint(err) != fmt.Sprint(errOrNil(tt.wantErr)) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if err == nil && (n != tt.want || util != tt.wantUtil) {
				t.Errorf("replicas %d utilization %d, want %d, %d", n, util, tt.want,
					tt.wantUtil)
			}
		})
	}
}

func errOrNil(s string) error {
	if s == "" {
		return nil
	}
	return fmt.Errorf("%s", s)
}

func TestOtherMetricReplicas(t *testing.T) {
	twoReady := []*corev1.Pod{runningPod("a", 100), runningPod("b", 100)}
	ctx := t.Context()
	ref := &autoscalingv2.CrossVersionObjectReference{Kind: "Service", Name: "s",
		APIVersion: "v1"}
	sel := labels.Everything()
	m := &fakeMetrics{at: t0, custom: map[string]int64{"a": 200, "b": 200},
		objectValue: 300, externalValues: []int64{100, 200}}
	c := newCalculator(t, m, twoReady...)
	check := func(what string, n int32, usage int64, err error, wantN int32, wantUsage int64) {
		t.Helper()
		if err != nil || n != wantN || usage != wantUsage {
			t.Errorf("%s: %d, %d, %v; want %d, %d", what, n, usage, err, wantN, wantUsage)
		}
	}
	n, usage, _, err := c.podsMetricReplicas(ctx, 2, 100, "qps", defaultTolerance, ns, sel, sel)
	check("pods metric", n, usage, err, 4, 200)
	n, usage, _, err = c.objectReplicas(ctx, 2, 100, "hits", defaultTolerance, ns, ref, sel, sel)
	check("object value", n, usage, err, 6, 300)
	n, usage, _, err = c.objectReplicas(ctx, 0, 100, "hits", defaultTolerance, ns, ref, sel, sel)
	check("object value from zero", n, usage, err, 3, 300)
	n, usage, _, err = c.objectPerPodReplicas(ctx, 2, 100, "hits", defaultTolerance, ns, ref,
		sel)
	check("object average", n, usage, err, 3, 150)
	n, usage, _, err = c.externalReplicas(ctx, 2, 100, "queue", defaultTolerance, ns, nil, sel)
	check("external value", n, usage, err, 6, 300)
	n, usage, _, err = c.externalPerPodReplicas(ctx, 2, 50, "queue", defaultTolerance, ns, nil)
	check("external average", n, usage, err, 6, 150)
	n, usage, _, err = c.externalPerPodReplicas(ctx, 2, 140, "queue", defaultTolerance, ns,
		nil)
	check("external average within tolerance", n, usage, err, 2, 150)
}

func TestPolicyLimits(t *testing.T) {
	pods := func(v, period int32) autoscalingv2.HPAScalingPolicy {
		return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: v,
			PeriodSeconds: period}
	}
	percent := func(v, period int32) autoscalingv2.HPAScalingPolicy {
		return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy,
			Value: v, PeriodSeconds: period}
	}
	rules := func(sel autoscalingv2.ScalingPolicySelect,
		ps ...autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
		return &autoscalingv2.HPAScalingRules{SelectPolicy: &sel, Policies: ps}
	}
	recent := []scaleEvent{{change: 2, at: t0.Add(-30 * time.Second)},
		{change: 5, at: t0.Add(-time.Hour)}}
	for _, tc := range []struct {
		name    string
		up      bool
		r       *autoscalingv2.HPAScalingRules
		ups     []scaleEvent
		downs   []scaleEvent
		current int32
		want    int32
	}{
		{"up, max of pods and percent", true, rules(autoscalingv2.MaxChangePolicySelect,
			pods(4, 60), percent(100, 60)), nil, nil, 10, 20},
		{"up, min of pods and percent", true, rules(autoscalingv2.MinChangePolicySelect,
			pods(4, 60), percent(100, 60)), nil, nil, 10, 14},
		{"up, disabled", true, rules(autoscalingv2.DisabledPolicySelect, pods(4, 60)), nil,
			nil, 10, 10},
		{"up, the period's scale-ups count", true, rules(autoscalingv2.MaxChangePolicySelect,
			pods(4, 60)), recent, nil, 10, 12},
		{"up, percent rounds up", true, rules(autoscalingv2.MaxChangePolicySelect,
			percent(10, 60)), nil, nil, 3, 4},
		{"down, max change", false, rules(autoscalingv2.MaxChangePolicySelect,
			pods(1, 60), percent(50, 60)), nil, nil, 10, 5},
		{"down, min change", false, rules(autoscalingv2.MinChangePolicySelect,
			pods(1, 60), percent(50, 60)), nil, nil, 10, 9},
		{"down, the period's scale-downs count", false,
			rules(autoscalingv2.MaxChangePolicySelect, pods(3, 60)), nil, recent, 10, 9},
		{"down, percent rounds down", false, rules(autoscalingv2.MaxChangePolicySelect,
			percent(10, 60)), nil, nil, 3, 2},
	} {
		var got int32
		if tc.up {
			got = scaleUpLimit(tc.current, tc.ups, tc.downs, tc.r, t0)
		} else {
			got = scaleDownLimit(tc.current, tc.ups, tc.downs, tc.r, t0)
		}
		if got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestStabilizeWithBehavior(t *testing.T) {
	h := newHistory()
	w := func(s int32) *int32 { return &s }
	a := normalization{key: "k", current: 5, min: 1, max: 10,
		scaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: w(0)},
		scaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: w(60)}}
	h.seed("k", 5, t0)
	a.desired = 2
	if n, reason, _ := h.stabilizeWithBehavior(a, t0.Add(10*time.Second)); n != 5 ||
		reason != "ScaleDownStabilized" {
		t.Errorf("within the window: %d %s, want 5 ScaleDownStabilized", n, reason)
	}
	a.desired = 3
	if n, _, _ := h.stabilizeWithBehavior(a, t0.Add(61*time.Second)); n != 3 {
		t.Errorf("after the window: %d, want 3 (the highest of 2 and 3)", n)
	}
	if got := len(h.recommendations["k"]); got != 2 {
		t.Errorf("%d recommendations kept, want 2 (the seed's slot, outside both windows, "+
			"reused)", got)
	}
}

func TestPodRequest(t *testing.T) {
	q := resource.MustParse
	requests := func(cpu string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: q(cpu)}}
	}
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want string // "" for no request
	}{
		{"the pod-level request wins", corev1.PodSpec{
			Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: q("400m")}},
			Containers: []corev1.Container{{Resources: requests("100m")}}}, "400m"},
		{"a pod-level request of memory only: the containers' CPU", corev1.PodSpec{
			Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceMemory: q("1Gi")}},
			Containers: []corev1.Container{{Resources: requests("100m")},
				{Resources: requests("50m")}}}, "150m"},
		{"a larger init container", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: requests("300m")}},
			Containers:     []corev1.Container{{Resources: requests("100m")}}}, "300m"},
		{"an init container after a sidecar runs beside it", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: requests("50m"), RestartPolicy: always},
				{Resources: requests("200m")}},
			Containers: []corev1.Container{{Resources: requests("100m")}}}, "250m"},
		{"sidecars add to the containers", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: requests("50m"), RestartPolicy: always},
				{Resources: requests("20m")}},
			Containers: []corev1.Container{{Resources: requests("100m")}}}, "150m"},
		{"overhead adds", corev1.PodSpec{
			Overhead: corev1.ResourceList{corev1.ResourceCPU: q("10m")},
			Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: q("400m")}}}, "410m"},
		{"no request", corev1.PodSpec{Resources: &corev1.ResourceRequirements{},
			Containers: []corev1.Container{{}}}, ""},
	} {
		got, ok := podRequest(&corev1.Pod{Spec: tc.spec}, corev1.ResourceCPU)
		switch {
		case tc.want == "" && ok:
			t.Errorf("%s: %s, want none", tc.name, got.String())
		case tc.want != "" && (!ok || got.Cmp(q(tc.want)) != 0):
			t.Errorf("%s: %s (%v), want %s", tc.name, got.String(), ok, tc.want)
		}
	}
}
