package hpa

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

func twoPods() []*corev1.Pod { return []*corev1.Pod{runningPod("a", 100), runningPod("b", 100)} }

func TestReconcile(t *testing.T) {
	const (
		utilMsg  = "cpu resource utilization (percentage of request)"
		scaledUp = "Normal SuccessfulRescale New size: 4; reason: " + utilMsg + " above target"
	)
	withPolicy := func(h *autoscalingv2.HorizontalPodAutoscaler) {
		h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0),
				SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy,
					Value: 1, PeriodSeconds: 60}}},
			ScaleDown: &autoscalingv2.HPAScalingRules{
				SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy,
					Value: 1, PeriodSeconds: 60}}},
		}
	}
	tests := []struct {
		name     string
		hpa      func(*autoscalingv2.HorizontalPodAutoscaler)
		replicas int32
		cpu      map[string]int64
		setup    func(*fixture)
		wantErr  string
		updates  []int32
		conds    map[autoscalingv2.HorizontalPodAutoscalerConditionType]string
		events   []string
		desired  int32
		// unwritten: the status counts are left as they were (KCM writes
		// only the condition on these failures)
		unwritten bool
	}{
		{name: "scale up, capped at twice the replicas without behaviour",
			replicas: 2, cpu: map[string]int64{"a": 150, "b": 150}, updates: []int32{4}, desired: 4,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.AbleToScale: "True SucceededRescale: the HPA controller was able " +
					"to update the target scale to 4",
				autoscalingv2.ScalingActive: "True ValidMetricFound: the HPA was able to " +
					"successfully calculate a replica count from " + utilMsg,
				autoscalingv2.ScalingLimited: "True ScaleUpLimit: the desired replica count is " +
					"increasing faster than the maximum scale rate",
				autoscalingv2.ScaledToZero: "False NotScaledToZero: the HPA controller did not " +
					"scale the workload to zero",
			},
			events: []string{scaledUp}},
		{name: "within tolerance: nothing scales",
			replicas: 2, cpu: map[string]int64{"a": 52, "b": 52}, desired: 2,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.AbleToScale: "True ReadyForNewScale: recommended size matches " +
					"current size",
				autoscalingv2.ScalingLimited: "False DesiredWithinRange: the desired count is " +
					"within the acceptable range",
			}},
		{name: "scale down held by the downscale window",
			replicas: 2, cpu: map[string]int64{"a": 10, "b": 10}, desired: 2,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.AbleToScale: "True ScaleDownStabilized: recent recommendations " +
					"were higher than current one, applying the highest recent recommendation",
			}},
		{name: "behaviour policy limits the scale up",
			hpa: withPolicy, replicas: 2, cpu: map[string]int64{"a": 150, "b": 150},
			updates: []int32{3}, desired: 3,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.ScalingLimited: "True ScaleUpLimit: the desired replica count is " +
					"increasing faster than the maximum scale rate",
			}},
		{name: "behaviour without a window scales down at once",
			hpa: func(h *autoscalingv2.HorizontalPodAutoscaler) {
				withPolicy(h)
				h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds = ptr.To[int32](0)
			},
			replicas: 2, cpu: map[string]int64{"a": 10, "b": 10}, updates: []int32{1}, desired: 1,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.ScalingLimited: "False DesiredWithinRange: the desired count is " +
					"within the acceptable range",
			},
			events: []string{
				"Normal SuccessfulRescale New size: 1; reason: All metrics below target"}},
		{name: "above max: brought down without metrics",
			replicas: 12, updates: []int32{10}, desired: 10,
			events: []string{"Normal SuccessfulRescale New size: 10; reason: Current number of " +
				"replicas above Spec.MaxReplicas"}},
		{name: "a target at zero is left alone",
			replicas: 0, desired: 0,
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.ScalingActive: "False ScalingDisabled: scaling is disabled since " +
					"the replica count of the target is zero",
			}},
		{name: "no metrics: ScalingActive false, the error returned",
			replicas: 2, desired: 0,
			wantErr: "failed to compute desired number of replicas based on listed metrics for " +
				"Deployment/default/web: invalid metrics (1 invalid out of 1), first error is: " +
				"failed to get cpu resource metric value: failed to get cpu utilization: unable " +
				"to get metrics for resource cpu: no metrics returned from resource metrics API",
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.ScalingActive: "False FailedGetResourceMetric: the HPA was unable " +
					"to compute the replica count: failed to get cpu utilization: unable to get " +
					"metrics for resource cpu: no metrics returned from resource metrics API",
			}},
		{name: "no scale: FailedGetScale",
			replicas: 2, setup: func(f *fixture) { f.scaleErr = errors.New("boom") },
			unwritten: true,
			wantErr:   "failed to query scale subresource for Deployment/default/web: boom",
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.AbleToScale: "False FailedGetScale: the HPA controller was unable " +
					"to get the target's current scale: boom",
			},
			events: []string{"Warning FailedGetScale boom"}},
		{name: "no selector on the scale",
			replicas: 2, setup: func(f *fixture) { f.selector = "" },
			wantErr: "selector is required",
			conds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.ScalingActive: "False InvalidSelector: the HPA target's scale is " +
					"missing a selector",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := cpuHPA(50, 10)
			if tt.hpa != nil {
				tt.hpa(h)
			}
			f := newFixture(t, h, tt.replicas, twoPods()...)
			f.metrics.cpu = tt.cpu
			if tt.setup != nil {
				tt.setup(f)
			}
			st, err := f.sync()
			if got := fmt.Sprint(err); tt.wantErr == "" && err != nil ||
				tt.wantErr != "" && !strings.Contains(got, tt.wantErr) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if !slices.Equal(f.updates, tt.updates) {
				t.Errorf("scale updates %v, want %v", f.updates, tt.updates)
			}
			if st == nil {
				t.Fatal("no status written")
			}
			if !tt.unwritten && (st.DesiredReplicas != tt.desired ||
				st.CurrentReplicas != tt.replicas) {
				t.Errorf("status current %d desired %d, want %d, %d", st.CurrentReplicas,
					st.DesiredReplicas, tt.replicas, tt.desired)
			}
			for ct, want := range tt.conds {
				if got := cond(st, ct); got != want {
					t.Errorf("%s:\n got %s\nwant %s", ct, got, want)
				}
			}
			if ev := f.events(); tt.events != nil && !slices.Equal(ev, tt.events) {
				t.Errorf("events %q, want %q", ev, tt.events)
			}
			if (len(tt.updates) > 0) != (st.LastScaleTime != nil) {
				t.Errorf("lastScaleTime %v after %d updates", st.LastScaleTime, len(tt.updates))
			}
			if !tt.unwritten && (st.ObservedGeneration == nil || *st.ObservedGeneration != 1) {
				t.Errorf("observedGeneration %v, want 1", st.ObservedGeneration)
			}
		})
	}
}

func TestStatusMetrics(t *testing.T) {
	f := newFixture(t, cpuHPA(50, 10), 2, twoPods()...)
	f.metrics.cpu = map[string]int64{"a": 150, "b": 150}
	st, err := f.sync()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.CurrentMetrics) != 1 || st.CurrentMetrics[0].Resource == nil {
		t.Fatalf("currentMetrics %+v", st.CurrentMetrics)
	}
	cur := st.CurrentMetrics[0].Resource.Current
	if *cur.AverageUtilization != 150 || cur.AverageValue.String() != "150m" {
		t.Errorf("current %d%% %s, want 150%% 150m", *cur.AverageUtilization, cur.AverageValue)
	}
	// Nothing changed: no second write.
	f = newFixture(t, cpuHPA(50, 10), 2, twoPods()...)
	f.metrics.cpu = map[string]int64{"a": 52, "b": 52}
	if st, err := f.sync(); err != nil || st == nil {
		t.Fatalf("first sync: %v, status %v", err, st)
	}
	if st, err := f.sync(); err != nil || st != nil {
		t.Errorf("an unchanged status was written again: %v, %+v", err, st)
	}
}

// TestDownscaleWindowPasses: without behaviour, a scale-down waits out
// the downscale stabilization window.
func TestDownscaleWindowPasses(t *testing.T) {
	f := newFixture(t, cpuHPA(50, 10), 2, twoPods()...)
	f.metrics.cpu = map[string]int64{"a": 10, "b": 10}
	if _, err := f.sync(); err != nil || len(f.updates) != 0 {
		t.Fatalf("first sync: %v, updates %v", err, f.updates)
	}
	f.clock.Step(defaultDownscaleStabilization - time.Second)
	if _, err := f.sync(); err != nil || len(f.updates) != 0 {
		t.Fatalf("within the window: %v, updates %v", err, f.updates)
	}
	f.clock.Step(2 * time.Second)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	// The recommendations of the window are 1 now, save the seed (2) now
	// outside it, and the one made a second before the window's end.
	f.clock.Step(defaultDownscaleStabilization)
	if _, err := f.sync(); err != nil || !slices.Equal(f.updates, []int32{1}) {
		t.Fatalf("after the window: %v, updates %v, want [1]", err, f.updates)
	}
}

// TestPolicyPeriod: a Pods policy of 1 per minute scales one pod a minute.
func TestPolicyPeriod(t *testing.T) {
	h := cpuHPA(50, 10)
	h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0),
			Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy,
				Value: 1, PeriodSeconds: 60}}},
	}
	pods := twoPods()
	for _, n := range []string{"c", "d"} {
		pods = append(pods, runningPod(n, 100))
	}
	f := newFixture(t, h, 2, pods...)
	f.metrics.cpu = map[string]int64{"a": 150, "b": 150, "c": 150, "d": 150}
	for range 3 {
		if _, err := f.sync(); err != nil {
			t.Fatal(err)
		}
		f.clock.Step(10 * time.Second)
	}
	if !slices.Equal(f.updates, []int32{3}) {
		t.Fatalf("within a minute: updates %v, want [3]", f.updates)
	}
	f.clock.Step(time.Minute)
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.updates, []int32{3, 4}) {
		t.Fatalf("a minute on: updates %v, want [3 4]", f.updates)
	}
}

func TestAmbiguousSelector(t *testing.T) {
	f := newFixture(t, cpuHPA(50, 10), 2, twoPods()...)
	other := cpuHPA(50, 10)
	other.Name = "other"
	if err := f.hpaIdx.Add(other); err != nil {
		t.Fatal(err)
	}
	f.c.added(other, false)
	f.c.selectors.putIfPresent(ns+"/other", mustSelector(t, "app=web"))
	f.metrics.cpu = map[string]int64{"a": 150, "b": 150}
	st, err := f.sync()
	want := "pods by selector app=web are controlled by more than one HPA " +
		"(e.g. [default/other default/web])"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
	if got := cond(st, autoscalingv2.ScalingActive); got != "False AmbiguousSelector: "+want {
		t.Errorf("ScalingActive %s", got)
	}
	// Once the other HPA is gone, scaling resumes.
	f.c.deleted(other)
	if _, err := f.sync(); err != nil || !slices.Equal(f.updates, []int32{4}) {
		t.Fatalf("after the other went: %v, updates %v", err, f.updates)
	}
}

func TestDeletedHPAForgetsHistory(t *testing.T) {
	f := newFixture(t, cpuHPA(50, 10), 2, twoPods()...)
	f.metrics.cpu = map[string]int64{"a": 10, "b": 10}
	if _, err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if len(f.c.history.recommendations[ns+"/web"]) == 0 {
		t.Fatal("no recommendation recorded")
	}
	h, _ := f.c.hpas.HorizontalPodAutoscalers(ns).Get("web")
	if err := f.hpaIdx.Delete(h); err != nil {
		t.Fatal(err)
	}
	f.c.deleted(h)
	if err := f.c.sync(t.Context(), ns+"/web"); err != nil {
		t.Fatalf("sync of a deleted HPA: %v", err)
	}
	if len(f.c.history.recommendations) != 0 {
		t.Errorf("history kept: %v", f.c.history.recommendations)
	}
}

func TestToleranceFromBehavior(t *testing.T) {
	h := cpuHPA(50, 10)
	h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: ptrQuantity("0.5")},
	}
	f := newFixture(t, h, 2, twoPods()...)
	f.metrics.cpu = map[string]int64{"a": 70, "b": 70} // ratio 1.4: within 50%
	if _, err := f.sync(); err != nil || len(f.updates) != 0 {
		t.Fatalf("%v, updates %v; want none within the behaviour's tolerance", err, f.updates)
	}
	f.c.configurableTolerance = false
	if _, err := f.sync(); err != nil || !slices.Equal(f.updates, []int32{3}) {
		t.Fatalf("gate off: %v, updates %v; want [3] (the flag's 10%%)", err, f.updates)
	}
}

func TestUpdatedHandler(t *testing.T) {
	f := newFixture(t, cpuHPA(50, 10), 2) // queues default/web
	old := cpuHPA(50, 10)
	old.Name = "x"
	cur := old.DeepCopy()
	cur.Generation = 2
	f.c.updated(old, cur)
	if f.c.loop.Len() != 2 {
		t.Errorf("a new generation is not queued at once (len %d, want 2)", f.c.loop.Len())
	}
	st := old.DeepCopy()
	st.Name, st.ResourceVersion = "y", "9"
	f.c.updated(old, st)
	if f.c.loop.Len() != 2 {
		t.Errorf("a status update was queued at once (len %d, want 2)", f.c.loop.Len())
	}
}

func mustSelector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func ptrQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// TestScaleToZero: with minReplicas 0 and an external metric, an empty
// queue takes the target to zero (ScaledToZero True); at zero the HPA
// keeps computing, and a queue brings it back.
func TestScaleToZero(t *testing.T) {
	h := cpuHPA(50, 10)
	h.Spec.MinReplicas = ptr.To[int32](0)
	avg := resource.MustParse("10")
	h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType,
		External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "jobs"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType,
				AverageValue: &avg}}}}
	h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}}
	f := newFixture(t, h, 2, twoPods()...)
	f.metrics.externalValues = []int64{0}
	st, err := f.sync()
	if err != nil || !slices.Equal(f.updates, []int32{0}) {
		t.Fatalf("to zero: %v, updates %v", err, f.updates)
	}
	if got := cond(st, autoscalingv2.ScaledToZero); got != "True ScaledToZero: the HPA "+
		"controller scaled the workload to zero" {
		t.Errorf("ScaledToZero %s", got)
	}
	if st, err = f.sync(); err != nil || len(f.updates) != 1 ||
		cond(st, autoscalingv2.ScalingActive) == "False ScalingDisabled" {
		t.Fatalf("at zero: %v, updates %v, status %+v", err, f.updates, st)
	}
	f.metrics.externalValues = []int64{30000}
	st, err = f.sync()
	if err != nil || !slices.Equal(f.updates, []int32{0, 3}) {
		t.Fatalf("back: %v, updates %v", err, f.updates)
	}
	if got := cond(st, autoscalingv2.ScaledToZero); !strings.HasPrefix(got,
		"False NotScaledToZero") {
		t.Errorf("ScaledToZero %s", got)
	}
	// With the gate off, a target at zero is left alone.
	f.c.scaleToZero = false
	f.replicas = 0
	if st, err = f.sync(); err != nil || cond(st, autoscalingv2.ScalingActive) !=
		"False ScalingDisabled: scaling is disabled since the replica count of the target "+
			"is zero" || cond(st, autoscalingv2.ScaledToZero) != "<none>" {
		t.Errorf("gate off: %v, %+v", err, st)
	}
}
