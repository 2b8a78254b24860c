package hpa

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	customfake "k8s.io/metrics/pkg/client/custom_metrics/fake"
	externalfake "k8s.io/metrics/pkg/client/external_metrics/fake"
)

func usage(cpu string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
}

func TestRESTMetrics(t *testing.T) {
	ts := metav1.NewTime(t0)
	podMetric := func(name string,
		cs ...metricsv1beta1.ContainerMetrics) metricsv1beta1.PodMetrics {
		return metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Timestamp:  ts, Window: metav1.Duration{Duration: time.Minute}, Containers: cs}
	}
	resources := &metricsfake.Clientset{}
	resources.AddReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object,
		error) {
		return true, &metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{
			podMetric("both", metricsv1beta1.ContainerMetrics{Name: "c", Usage: usage("100m")},
				metricsv1beta1.ContainerMetrics{Name: "d", Usage: usage("50m")}),
			podMetric("partial", metricsv1beta1.ContainerMetrics{Name: "c",
				Usage: usage("100m")},
				metricsv1beta1.ContainerMetrics{Name: "d", Usage: corev1.ResourceList{}}),
			podMetric("empty"),
		}}, nil
	})
	custom := &customfake.FakeCustomMetricsClient{}
	custom.AddReactor("get", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		v := custommetricsv1beta2.MetricValue{Timestamp: ts,
			DescribedObject: corev1.ObjectReference{Kind: "Pod", Name: "a"},
			Value:           resource.MustParse("2")}
		return true, &custommetricsv1beta2.MetricValueList{
			Items: []custommetricsv1beta2.MetricValue{v}}, nil
	})
	external := &externalfake.FakeExternalMetricsClient{}
	external.AddReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &externalmetricsv1beta1.ExternalMetricValueList{
			Items: []externalmetricsv1beta1.ExternalMetricValue{
				{Value: resource.MustParse("1"), Timestamp: ts},
				{Value: resource.MustParse("500m"), Timestamp: ts}}}, nil
	})
	m := restMetrics{resources: resources.MetricsV1beta1(), custom: custom, externals: external}
	ctx := t.Context()

	got, at, err := m.resource(ctx, corev1.ResourceCPU, ns, labels.Everything(), "")
	if err != nil || !at.Equal(t0) {
		t.Fatalf("resource: %v, %v", at, err)
	}
	if len(got) != 1 || got["both"].value != 150 || got["both"].window != time.Minute {
		t.Errorf("pod sums %+v, want both=150 only (partial and empty lack samples)", got)
	}
	got, _, err = m.resource(ctx, corev1.ResourceCPU, ns, labels.Everything(), "d")
	if err != nil || len(got) != 1 || got["both"].value != 50 {
		t.Errorf("container d: %+v, %v; want both=50 only", got, err)
	}

	pods, _, err := m.pods(ctx, "qps", ns, labels.Everything(), labels.Everything())
	if err != nil || pods["a"].value != 2000 || pods["a"].window != defaultCustomWindow {
		t.Errorf("pods metric %+v, %v; want a=2000 over a minute", pods, err)
	}
	ref := &autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service",
		Name: "s"}
	if v, _, err := m.object(ctx, "hits", ns, ref, labels.Everything()); err != nil || v != 2000 {
		t.Errorf("object metric %d, %v; want 2000", v, err)
	}
	nsRef := &autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Namespace",
		Name: "elsewhere"}
	if _, _, err := m.object(ctx, "hits", ns, nsRef, labels.Everything()); err != nil {
		t.Errorf("namespace metric: %v", err)
	}
	root := false
	for _, a := range custom.Actions() {
		if g, ok := a.(customfake.GetForActionImpl); ok && g.GetNamespace() == "" &&
			g.GetName() == ns {
			root = true
		}
	}
	if !root {
		t.Errorf("a Namespace's metric was not asked for at the root, of the HPA's own: %v",
			custom.Actions())
	}
	vals, _, err := m.external(ctx, "queue", ns, labels.Everything())
	if err != nil || len(vals) != 2 || vals[0] != 1000 || vals[1] != 500 {
		t.Errorf("external %v, %v; want [1000 500]", vals, err)
	}

	none := &metricsfake.Clientset{}
	none.AddReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &metricsv1beta1.PodMetricsList{}, nil
	})
	empty := restMetrics{resources: none.MetricsV1beta1()}
	if _, _, err := empty.resource(ctx, corev1.ResourceCPU, ns, labels.Everything(),
		""); err == nil ||
		err.Error() != "no metrics returned from resource metrics API" {
		t.Errorf("no pod metrics: %v", err)
	}
}
