package hpa

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
)

// defaultCustomWindow is the window a custom metric without one is taken
// to cover, as KCM takes it.
const defaultCustomWindow = time.Minute

// podMetric is one pod's sample, in milli-units.
type podMetric struct {
	timestamp time.Time
	window    time.Duration
	value     int64
}

// podMetrics are samples by pod name.
type podMetrics map[string]podMetric

// metricsSource reads the metrics APIs.
type metricsSource interface {
	// resource returns the pods' usage of a resource (of one container
	// when container is set, else summed over their containers) and the
	// first sample's time.
	resource(ctx context.Context, res corev1.ResourceName, namespace string,
		selector labels.Selector, container string) (podMetrics, time.Time, error)
	// pods returns a custom metric of the pods the selector matches.
	pods(ctx context.Context, metric, namespace string, selector,
		metricSelector labels.Selector) (podMetrics, time.Time, error)
	// object returns a custom metric of one object.
	object(ctx context.Context, metric, namespace string,
		ref *autoscalingv2.CrossVersionObjectReference,
		metricSelector labels.Selector) (int64, time.Time, error)
	// external returns the values of an external metric.
	external(ctx context.Context, metric, namespace string,
		selector labels.Selector) ([]int64, time.Time, error)
}

// restMetrics reads the resource, custom and external metrics APIs.
type restMetrics struct {
	resources resourceclient.PodMetricsesGetter
	custom    customclient.CustomMetricsClient
	externals externalclient.ExternalMetricsClient
}

func (m restMetrics) resource(ctx context.Context, res corev1.ResourceName, namespace string,
	selector labels.Selector, container string) (podMetrics, time.Time, error) {
	list, err := m.resources.PodMetricses(namespace).List(ctx,
		metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf(
			"unable to fetch metrics from resource metrics API: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, errors.New("no metrics returned from resource metrics API")
	}
	log := logr.FromContextOrDiscard(ctx)
	out := make(podMetrics, len(list.Items))
	for i := range list.Items {
		pm := &list.Items[i]
		if v, ok := podUsage(log, pm, res, container); ok {
			out[pm.Name] = podMetric{timestamp: pm.Timestamp.Time, window: pm.Window.Duration,
				value: v}
		}
	}
	return out, list.Items[0].Timestamp.Time, nil
}

// podUsage sums a pod's containers' usage of res, or takes the named
// container's; false when a sample is missing.
func podUsage(log logr.Logger, pm *metricsv1beta1.PodMetrics, res corev1.ResourceName,
	container string) (int64, bool) {
	if container != "" {
		for _, c := range pm.Containers {
			if c.Name != container {
				continue
			}
			v, ok := c.Usage[res]
			return v.MilliValue(), ok
		}
		log.V(2).Info("Missing container metric", "container", container,
			"pod", pm.Namespace+"/"+pm.Name)
		return 0, false
	}
	if len(pm.Containers) == 0 {
		return 0, false
	}
	var sum int64
	for _, c := range pm.Containers {
		v, ok := c.Usage[res]
		if !ok {
			log.V(2).Info("Missing resource metric", "resourceMetric", res,
				"pod", pm.Namespace+"/"+pm.Name)
			return 0, false
		}
		sum += v.MilliValue()
	}
	return sum, true
}

func (m restMetrics) pods(_ context.Context, metric, namespace string, selector,
	metricSelector labels.Selector) (podMetrics, time.Time, error) {
	list, err := m.custom.NamespacedMetrics(namespace).GetForObjects(
		schema.GroupKind{Kind: "Pod"}, selector, metric, metricSelector)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf(
			"unable to fetch metrics from custom metrics API: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, errors.New("no metrics returned from custom metrics API")
	}
	out := make(podMetrics, len(list.Items))
	for _, v := range list.Items {
		window := defaultCustomWindow
		if v.WindowSeconds != nil {
			window = time.Duration(*v.WindowSeconds) * time.Second
		}
		out[v.DescribedObject.Name] = podMetric{timestamp: v.Timestamp.Time, window: window,
			value: v.Value.MilliValue()}
	}
	return out, list.Items[0].Timestamp.Time, nil
}

func (m restMetrics) object(_ context.Context, metric, namespace string,
	ref *autoscalingv2.CrossVersionObjectReference,
	metricSelector labels.Selector) (int64, time.Time, error) {
	gk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind()
	var (
		err   error
		value int64
		ts    time.Time
	)
	// A Namespace is asked for at the root, and only the HPA's own.
	if gk.Kind == "Namespace" && gk.Group == "" {
		v, e := m.custom.RootScopedMetrics().GetForObject(gk, namespace, metric, metricSelector)
		if err = e; e == nil {
			value, ts = v.Value.MilliValue(), v.Timestamp.Time
		}
	} else {
		v, e := m.custom.NamespacedMetrics(namespace).GetForObject(gk, ref.Name, metric,
			metricSelector)
		if err = e; e == nil {
			value, ts = v.Value.MilliValue(), v.Timestamp.Time
		}
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %w",
			err)
	}
	return value, ts, nil
}

func (m restMetrics) external(_ context.Context, metric, namespace string,
	selector labels.Selector) ([]int64, time.Time, error) {
	list, err := m.externals.NamespacedMetrics(namespace).List(metric, selector)
	if err != nil {
		return []int64{}, time.Time{}, fmt.Errorf(
			"unable to fetch metrics from external metrics API: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, errors.New("no metrics returned from external metrics API")
	}
	out := make([]int64, 0, len(list.Items))
	for _, v := range list.Items {
		out = append(out, v.Value.MilliValue())
	}
	return out, list.Items[0].Timestamp.Time, nil
}
