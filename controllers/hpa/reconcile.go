package hpa

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
)

// reconcile is one pass over an HPA: read its target's scale, compute the
// replicas its metrics ask for, bound them, scale, and write the status.
func (c *controller) reconcile(ctx context.Context, shared *autoscalingv2.HorizontalPodAutoscaler,
	k string) (retErr error) {
	action, began := actionNone, time.Now()
	defer func() { c.monitor.reconciled(action, retErr, time.Since(began)) }()
	log := logr.FromContextOrDiscard(ctx)
	hpa := shared.DeepCopy()
	original := hpa.Status.DeepCopy()
	now := c.clock.Now()
	ref := fmt.Sprintf("%s/%s/%s", hpa.Spec.ScaleTargetRef.Kind, hpa.Namespace,
		hpa.Spec.ScaleTargetRef.Name)

	failedGetScale := func(err error) {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedGetScale", err.Error())
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale",
			fmt.Sprintf("the HPA controller was unable to get the target's current scale: %v",
				err), now)
		if err := c.updateStatusIfNeeded(ctx, original, hpa); err != nil {
			log.Error(err, "Writing the HPA's status", "HPA", k)
		}
	}
	gv, err := schema.ParseGroupVersion(hpa.Spec.ScaleTargetRef.APIVersion)
	if err != nil {
		failedGetScale(err)
		return fmt.Errorf("invalid API version in scale target reference: %v%w", err, errSpec)
	}
	mappings, err := c.mapper.RESTMappings(schema.GroupKind{Group: gv.Group,
		Kind: hpa.Spec.ScaleTargetRef.Kind})
	if err != nil {
		failedGetScale(err)
		return fmt.Errorf("unable to determine resource for scale target reference: %w", err)
	}
	sc, gr, err := c.scaleOf(ctx, hpa.Namespace, hpa.Spec.ScaleTargetRef.Name, mappings)
	if err != nil {
		failedGetScale(err)
		return fmt.Errorf("failed to query scale subresource for %s: %w", ref, err)
	}
	setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale",
		"the HPA controller was able to get the target's current scale", now)
	current := sc.Spec.Replicas
	c.history.seed(k, current, now)

	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	objectOrExternal := hasObjectOrExternal(hpa)
	scaledToZero := c.scaleToZero && conditionTrue(hpa, autoscalingv2.ScaledToZero)

	var (
		statuses []autoscalingv2.MetricStatus
		desired  int32
		reason   string
	)
	rescale, compute := true, true
	switch {
	case current == 0:
		if !(minReplicas != 0 && scaledToZero) && !(scaledToZero && objectOrExternal) {
			compute, rescale = false, false
			setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse,
				"ScalingDisabled",
				"scaling is disabled since the replica count of the target is zero", now)
			if !c.scaleToZero {
				removeCondition(hpa, autoscalingv2.ScaledToZero)
			}
		}
	case current > hpa.Spec.MaxReplicas:
		reason, desired, compute = "Current number of replicas above Spec.MaxReplicas",
			hpa.Spec.MaxReplicas, false
	case current < minReplicas:
		reason, desired, compute = "Current number of replicas below Spec.MinReplicas",
			minReplicas, false
	}

	if compute {
		proposed, metric, st, ts, err := c.replicasForMetrics(ctx, hpa, sc, now)
		statuses = st
		if err != nil && proposed == -1 {
			c.setStatus(hpa, current, hpa.Status.DesiredReplicas, statuses, false, now)
			if err := c.updateStatusIfNeeded(ctx, original, hpa); err != nil {
				log.Error(err, "Writing the HPA's status", "HPA", k)
			}
			c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedComputeMetricsReplicas",
				err.Error())
			return fmt.Errorf(
				"failed to compute desired number of replicas based on listed metrics for %s: %w",
				ref, err)
		}
		if err != nil {
			retErr = err // scale on the metrics that worked, then report it
		}
		msg := "Proposing desired replicas"
		if current == 0 {
			msg = "Proposing desired replicas from zero"
		}
		log.V(4).Info(msg, "desiredReplicas", proposed, "metric", metric,
			"tolerances", c.tolerancesFor(hpa), "timestamp", ts, "scaleTarget", ref)
		rescaleMetric := ""
		if proposed > desired {
			desired, rescaleMetric = proposed, metric
		}
		if desired > current {
			reason = fmt.Sprintf("%s above target", rescaleMetric)
		}
		if desired < current {
			reason = "All metrics below target"
		}
		if hpa.Spec.Behavior == nil {
			desired = c.normalize(hpa, k, current, desired, minReplicas, now)
		} else {
			defaultBehavior(hpa.Spec.Behavior)
			desired = c.normalizeWithBehavior(hpa, k, current, desired, minReplicas, now)
		}
		if current == 0 && minReplicas != 0 && scaledToZero && desired < minReplicas {
			desired = minReplicas
			if reason == "" {
				reason = "Current number of replicas below Spec.MinReplicas"
			}
		}
		rescale = desired != current
	}

	if rescale {
		if err := c.scaleTo(ctx, hpa, gr, sc, desired); err != nil {
			c.recorder.Eventf(hpa, corev1.EventTypeWarning, "FailedRescale",
				"New size: %d; reason: %s; error: %v", desired, reason, err.Error())
			setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse,
				"FailedUpdateScale",
				fmt.Sprintf("the HPA controller was unable to update the target scale: %v", err),
				now)
			c.setStatus(hpa, current, hpa.Status.DesiredReplicas, statuses, false, now)
			if err := c.updateStatusIfNeeded(ctx, original, hpa); err != nil {
				log.Error(err, "Writing the HPA's status", "HPA", k)
			}
			return fmt.Errorf("failed to rescale %s: %w", ref, err)
		}
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale",
			fmt.Sprintf("the HPA controller was able to update the target scale to %d", desired),
			now)
		c.recorder.Eventf(hpa, corev1.EventTypeNormal, "SuccessfulRescale",
			"New size: %d; reason: %s", desired, reason)
		c.history.storeScaleEvent(hpa.Spec.Behavior, k, current, desired, now)
		log.Info("Successfully rescaled", "HPA", k, "currentReplicas", current,
			"desiredReplicas", desired, "reason", reason)
		switch {
		case !c.scaleToZero:
			removeCondition(hpa, autoscalingv2.ScaledToZero)
		case current > 0 && desired == 0 && minReplicas == 0 && objectOrExternal:
			setCondition(hpa, autoscalingv2.ScaledToZero, corev1.ConditionTrue, "ScaledToZero",
				"the HPA controller scaled the workload to zero", now)
		default:
			setCondition(hpa, autoscalingv2.ScaledToZero, corev1.ConditionFalse,
				"NotScaledToZero", "the HPA controller did not scale the workload to zero", now)
		}
		action = actionScaleDown
		if desired > current {
			action = actionScaleUp
		}
	} else {
		log.V(4).Info("Decided not to scale", "scaleTarget", ref, "desiredReplicas", desired,
			"lastScaleTime", hpa.Status.LastScaleTime)
		desired = current
	}
	c.setStatus(hpa, current, desired, statuses, rescale, now)
	c.monitor.desired.WithLabelValues(hpa.Namespace, hpa.Name).Set(float64(desired))
	if err := c.updateStatusIfNeeded(ctx, original, hpa); err != nil {
		return err
	}
	return retErr
}

// scaleOf reads the scale through each mapping in turn; the first
// mapping's error when none works.
func (c *controller) scaleOf(ctx context.Context, namespace, name string,
	mappings []*meta.RESTMapping) (*autoscalingv1.Scale, schema.GroupResource, error) {
	var first error
	for i, m := range mappings {
		gr := m.Resource.GroupResource()
		s, err := c.scales.Scales(namespace).Get(ctx, gr, name, metav1.GetOptions{})
		if err == nil {
			return s, gr, nil
		}
		if i == 0 {
			first = err
		}
	}
	if first == nil {
		first = errors.New("unrecognized resource")
	}
	return nil, schema.GroupResource{}, first
}

// scaleTo updates the scale, re-reading it after each conflict.
func (c *controller) scaleTo(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler,
	gr schema.GroupResource, sc *autoscalingv1.Scale, desired int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc.Spec.Replicas = desired
		_, err := c.scales.Scales(hpa.Namespace).Update(ctx, gr, sc, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		latest, gerr := c.scales.Scales(hpa.Namespace).Get(ctx, gr,
			hpa.Spec.ScaleTargetRef.Name, metav1.GetOptions{})
		if gerr == nil {
			sc = latest
		} else {
			logr.FromContextOrDiscard(ctx).Error(gerr, "Reading the latest scale after a conflict",
				"scaleTarget", hpa.Spec.ScaleTargetRef.Name)
		}
		return err
	})
}

// replicasForMetrics is the highest count the HPA's metrics ask for, the
// metric that asks it, and every metric's status. -1 with an error when
// it cannot scale: every metric failed, or some failed and the rest
// would scale down.
func (c *controller) replicasForMetrics(ctx context.Context,
	hpa *autoscalingv2.HorizontalPodAutoscaler, sc *autoscalingv1.Scale,
	now time.Time) (int32, string, []autoscalingv2.MetricStatus, time.Time, error) {
	selector, err := c.parseSelector(hpa, sc.Status.Selector, now)
	if err != nil {
		return -1, "", nil, time.Time{}, err
	}
	specs := hpa.Spec.Metrics
	statuses := make([]autoscalingv2.MetricStatus, len(specs))
	var (
		replicas       int32
		metric         string
		timestamp      time.Time
		invalid        int
		firstErr       error
		firstCondition autoscalingv2.HorizontalPodAutoscalerCondition
	)
	for i, spec := range specs {
		began := time.Now()
		n, name, ts, cond, err := c.replicasForMetric(ctx, hpa, spec, sc.Spec.Replicas,
			sc.Status.Replicas, selector, &statuses[i])
		c.monitor.computed(n, hpa.Status.CurrentReplicas, err, time.Since(began), spec.Type)
		if err != nil {
			if invalid == 0 {
				firstErr, firstCondition = err, cond
			}
			invalid++
			continue
		}
		if replicas == 0 || n > replicas {
			replicas, metric, timestamp = n, name, ts
		}
	}
	if firstErr != nil {
		firstErr = fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %w",
			invalid, len(specs), firstErr)
	}
	if invalid >= len(specs) || (invalid > 0 && replicas < sc.Spec.Replicas) {
		setCondition(hpa, firstCondition.Type, firstCondition.Status, firstCondition.Reason,
			firstCondition.Message, now)
		return -1, "", statuses, time.Time{}, firstErr
	}
	setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound",
		fmt.Sprintf("the HPA was able to successfully calculate a replica count from %s", metric),
		now)
	return replicas, metric, statuses, timestamp, firstErr
}

// parseSelector checks the target's selector: present, valid, and not
// selecting pods another HPA's target selects.
func (c *controller) parseSelector(hpa *autoscalingv2.HorizontalPodAutoscaler, raw string,
	now time.Time) (labels.Selector, error) {
	if raw == "" {
		msg := "selector is required"
		c.recorder.Event(hpa, corev1.EventTypeWarning, "SelectorRequired", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector",
			"the HPA target's scale is missing a selector", now)
		return nil, errors.New(msg)
	}
	sel, err := labels.Parse(raw)
	if err != nil {
		msg := fmt.Sprintf(
			"couldn't convert selector into a corresponding internal selector object: %v", err)
		c.recorder.Event(hpa, corev1.EventTypeWarning, "InvalidSelector", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector",
			msg, now)
		return nil, errors.New(msg)
	}
	k := hpa.Namespace + "/" + hpa.Name
	if !c.selectors.putIfPresent(k, sel) {
		return nil, fmt.Errorf("HPA %s/%s was deleted during reconciliation", hpa.Namespace,
			hpa.Name)
	}
	list, err := c.pods.Pods(hpa.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	if hpas := c.selectors.matching(hpa.Namespace, list, 2); len(hpas) > 1 {
		msg := fmt.Sprintf("pods by selector %v are controlled by more than one HPA (e.g. %v)",
			raw, hpas)
		c.recorder.Event(hpa, corev1.EventTypeWarning, "AmbiguousSelector", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse,
			"AmbiguousSelector", msg, now)
		return nil, errors.New(msg)
	}
	return sel, nil
}

// unable is the ScalingActive condition (and event) of a metric that
// could not be computed.
func (c *controller) unable(hpa *autoscalingv2.HorizontalPodAutoscaler, reason string,
	err error) autoscalingv2.HorizontalPodAutoscalerCondition {
	c.recorder.Event(hpa, corev1.EventTypeWarning, reason, err.Error())
	return autoscalingv2.HorizontalPodAutoscalerCondition{
		Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse, Reason: reason,
		Message: fmt.Sprintf("the HPA was unable to compute the replica count: %v", err),
	}
}

type condition = autoscalingv2.HorizontalPodAutoscalerCondition

// replicasForMetric computes one metric: the count it proposes, its
// description, its time, and, on failure, the condition to set.
func (c *controller) replicasForMetric(ctx context.Context,
	hpa *autoscalingv2.HorizontalPodAutoscaler, spec autoscalingv2.MetricSpec,
	specReplicas, statusReplicas int32, selector labels.Selector,
	status *autoscalingv2.MetricStatus) (int32, string, time.Time, condition, error) {
	switch spec.Type {
	case autoscalingv2.ObjectMetricSourceType:
		msel, err := metav1.LabelSelectorAsSelector(spec.Object.Metric.Selector)
		if err != nil {
			return 0, "", time.Time{}, c.unable(hpa, "FailedGetObjectMetric", err),
				fmt.Errorf("failed to get object metric value: %w", err)
		}
		n, ts, name, cond, err := c.objectMetric(ctx, specReplicas, statusReplicas, spec, hpa,
			selector, status, msel)
		if err != nil {
			return 0, "", time.Time{}, cond, fmt.Errorf("failed to get object metric value: %w",
				err)
		}
		return n, name, ts, condition{}, nil
	case autoscalingv2.PodsMetricSourceType:
		msel, err := metav1.LabelSelectorAsSelector(spec.Pods.Metric.Selector)
		if err != nil {
			return 0, "", time.Time{}, c.unable(hpa, "FailedGetPodsMetric", err),
				fmt.Errorf("failed to get pods metric value: %w", err)
		}
		n, usage, ts, err := c.calc.podsMetricReplicas(ctx, specReplicas,
			spec.Pods.Target.AverageValue.MilliValue(), spec.Pods.Metric.Name,
			c.tolerancesFor(hpa), hpa.Namespace, selector, msel)
		if err != nil {
			return 0, "", time.Time{}, c.unable(hpa, "FailedGetPodsMetric", err),
				fmt.Errorf("failed to get pods metric value: %w", err)
		}
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType,
			Pods: &autoscalingv2.PodsMetricStatus{
				Metric: autoscalingv2.MetricIdentifier{Name: spec.Pods.Metric.Name,
					Selector: spec.Pods.Metric.Selector},
				Current: autoscalingv2.MetricValueStatus{
					AverageValue: resource.NewMilliQuantity(usage, resource.DecimalSI)},
			}}
		return n, fmt.Sprintf("pods metric %s", spec.Pods.Metric.Name), ts, condition{}, nil
	case autoscalingv2.ResourceMetricSourceType:
		n, value, ts, name, err := c.resourceMetric(ctx, specReplicas, spec.Resource.Target,
			spec.Resource.Name, hpa, "", selector, spec.Type)
		if err != nil {
			return 0, "", time.Time{}, c.unable(hpa, "FailedGetResourceMetric", err),
				fmt.Errorf("failed to get %s resource metric value: %w", spec.Resource.Name, err)
		}
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: spec.Resource.Name,
				Current: *value}}
		return n, name, ts, condition{}, nil
	case autoscalingv2.ContainerResourceMetricSourceType:
		cr := spec.ContainerResource
		n, value, ts, name, err := c.resourceMetric(ctx, specReplicas, cr.Target, cr.Name, hpa,
			cr.Container, selector, spec.Type)
		if err != nil {
			return 0, "", time.Time{}, c.unable(hpa, "FailedGetContainerResourceMetric", err),
				fmt.Errorf("failed to get %s container metric value: %w", cr.Container, err)
		}
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ContainerResourceMetricSourceType,
			ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: cr.Name,
				Container: cr.Container, Current: *value}}
		return n, name, ts, condition{}, nil
	case autoscalingv2.ExternalMetricSourceType:
		n, ts, name, cond, err := c.externalMetric(ctx, specReplicas, statusReplicas, spec, hpa,
			selector, status)
		if err != nil {
			return 0, "", time.Time{}, cond, fmt.Errorf(
				"failed to get %s external metric value: %w", spec.External.Metric.Name, err)
		}
		return n, name, ts, condition{}, nil
	}
	err := fmt.Errorf("unknown metric source type %q%w", string(spec.Type), errSpec)
	return 0, "", time.Time{}, c.unable(hpa, "InvalidMetricSourceType", err), err
}

// resourceMetric computes a resource or container resource metric, by
// average value or by utilization.
func (c *controller) resourceMetric(ctx context.Context, current int32,
	target autoscalingv2.MetricTarget, res corev1.ResourceName,
	hpa *autoscalingv2.HorizontalPodAutoscaler, container string, selector labels.Selector,
	source autoscalingv2.MetricSourceType) (int32, *autoscalingv2.MetricValueStatus, time.Time,
	string, error) {
	tol := c.tolerancesFor(hpa)
	if target.AverageValue != nil {
		n, raw, ts, err := c.calc.rawResourceReplicas(ctx, current,
			target.AverageValue.MilliValue(), res, tol, hpa.Namespace, selector, container)
		if err != nil {
			return 0, nil, time.Time{}, "", fmt.Errorf("failed to get %s usage: %w", res, err)
		}
		q := quantity(res, raw)
		return n, &autoscalingv2.MetricValueStatus{AverageValue: &q}, ts,
			fmt.Sprintf("%s resource", res), nil
	}
	if target.AverageUtilization == nil {
		return 0, nil, time.Time{}, "", errors.New("invalid resource metric source: neither an " +
			"average utilization target nor an average value (usage) target was set")
	}
	n, util, raw, ts, err := c.calc.resourceReplicas(ctx, current, *target.AverageUtilization, res,
		tol, hpa.Namespace, selector, container)
	if err != nil {
		return 0, nil, time.Time{}, "", fmt.Errorf("failed to get %s utilization: %w", res, err)
	}
	name := fmt.Sprintf("%s resource utilization (percentage of request)", res)
	if source == autoscalingv2.ContainerResourceMetricSourceType {
		name = fmt.Sprintf("%s container resource utilization (percentage of request)", res)
	}
	q := quantity(res, raw)
	return n, &autoscalingv2.MetricValueStatus{AverageUtilization: &util, AverageValue: &q}, ts,
		name, nil
}

// quantity formats a milli-value as the metrics server does: memory in
// binary units, the rest in decimal.
func quantity(res corev1.ResourceName, milli int64) resource.Quantity {
	format := resource.DecimalSI
	if res == corev1.ResourceMemory {
		format = resource.BinarySI
	}
	return *resource.NewMilliQuantity(milli, format)
}

func (c *controller) objectMetric(ctx context.Context, specReplicas, statusReplicas int32,
	spec autoscalingv2.MetricSpec, hpa *autoscalingv2.HorizontalPodAutoscaler,
	selector labels.Selector, status *autoscalingv2.MetricStatus,
	msel labels.Selector) (int32, time.Time, string, condition, error) {
	o := spec.Object
	st := autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricStatus{DescribedObject: o.DescribedObject,
			Metric: autoscalingv2.MetricIdentifier{Name: o.Metric.Name,
				Selector: o.Metric.Selector}}}
	tol := c.tolerancesFor(hpa)
	switch {
	case o.Target.Type == autoscalingv2.ValueMetricType && o.Target.Value != nil:
		n, usage, ts, err := c.calc.objectReplicas(ctx, specReplicas, o.Target.Value.MilliValue(),
			o.Metric.Name, tol, hpa.Namespace, &o.DescribedObject, selector, msel)
		if err != nil {
			return 0, ts, "", c.unable(hpa, "FailedGetObjectMetric", err), err
		}
		st.Object.Current.Value = resource.NewMilliQuantity(usage, resource.DecimalSI)
		*status = st
		return n, ts, fmt.Sprintf("%s metric %s", o.DescribedObject.Kind, o.Metric.Name),
			condition{}, nil
	case o.Target.Type == autoscalingv2.AverageValueMetricType && o.Target.AverageValue != nil:
		n, usage, ts, err := c.calc.objectPerPodReplicas(ctx, statusReplicas,
			o.Target.AverageValue.MilliValue(), o.Metric.Name, tol, hpa.Namespace,
			&o.DescribedObject, msel)
		if err != nil {
			return 0, time.Time{}, "", c.unable(hpa, "FailedGetObjectMetric", err),
				fmt.Errorf("failed to get %s object metric: %w", o.Metric.Name, err)
		}
		st.Object.Current.AverageValue = resource.NewMilliQuantity(usage, resource.DecimalSI)
		*status = st
		// KCM describes this one as an external metric.
		return n, ts, fmt.Sprintf("external metric %s(%+v)", o.Metric.Name, o.Metric.Selector),
			condition{}, nil
	}
	err := errors.New("invalid object metric source: neither a value target nor an " +
		"average value target was set")
	return 0, time.Time{}, "", c.unable(hpa, "FailedGetObjectMetric", err), err
}

func (c *controller) externalMetric(ctx context.Context, specReplicas, statusReplicas int32,
	spec autoscalingv2.MetricSpec, hpa *autoscalingv2.HorizontalPodAutoscaler,
	selector labels.Selector, status *autoscalingv2.MetricStatus) (int32, time.Time, string,
	condition, error) {
	e := spec.External
	tol := c.tolerancesFor(hpa)
	name := fmt.Sprintf("external metric %s(%+v)", e.Metric.Name, e.Metric.Selector)
	st := func(v autoscalingv2.MetricValueStatus) autoscalingv2.MetricStatus {
		return autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType,
			External: &autoscalingv2.ExternalMetricStatus{
				Metric: autoscalingv2.MetricIdentifier{Name: e.Metric.Name,
					Selector: e.Metric.Selector},
				Current: v}}
	}
	if e.Target.AverageValue != nil {
		n, usage, ts, err := c.calc.externalPerPodReplicas(ctx, statusReplicas,
			e.Target.AverageValue.MilliValue(), e.Metric.Name, tol, hpa.Namespace,
			e.Metric.Selector)
		if err != nil {
			return 0, time.Time{}, "", c.unable(hpa, "FailedGetExternalMetric", err),
				fmt.Errorf("failed to get %s external metric: %w", e.Metric.Name, err)
		}
		*status = st(autoscalingv2.MetricValueStatus{
			AverageValue: resource.NewMilliQuantity(usage, resource.DecimalSI)})
		return n, ts, name, condition{}, nil
	}
	if e.Target.Value != nil {
		n, usage, ts, err := c.calc.externalReplicas(ctx, specReplicas, e.Target.Value.MilliValue(),
			e.Metric.Name, tol, hpa.Namespace, e.Metric.Selector, selector)
		if err != nil {
			return 0, time.Time{}, "", c.unable(hpa, "FailedGetExternalMetric", err),
				fmt.Errorf("failed to get external metric %s: %w", e.Metric.Name, err)
		}
		*status = st(autoscalingv2.MetricValueStatus{
			Value: resource.NewMilliQuantity(usage, resource.DecimalSI)})
		return n, ts, name, condition{}, nil
	}
	err := errors.New("invalid external metric source: neither a value target nor an " +
		"average value target was set")
	return 0, time.Time{}, "", c.unable(hpa, "FailedGetExternalMetric", err), err
}

// tolerancesFor is the flag's tolerance, or the behaviour's when set (and
// HPAConfigurableTolerance is on).
func (c *controller) tolerancesFor(hpa *autoscalingv2.HorizontalPodAutoscaler) tolerances {
	t := tolerances{c.tolerance, c.tolerance}
	b := hpa.Spec.Behavior
	if b == nil || !c.configurableTolerance {
		return t
	}
	if b.ScaleDown != nil && b.ScaleDown.Tolerance != nil {
		t.down = b.ScaleDown.Tolerance.AsApproximateFloat64()
	}
	if b.ScaleUp != nil && b.ScaleUp.Tolerance != nil {
		t.up = b.ScaleUp.Tolerance.AsApproximateFloat64()
	}
	return t
}

// setStatus rebuilds the status around its conditions and last scale time.
func (c *controller) setStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, current,
	desired int32, metrics []autoscalingv2.MetricStatus, rescaled bool, now time.Time) {
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas: current,
		DesiredReplicas: desired,
		LastScaleTime:   hpa.Status.LastScaleTime,
		CurrentMetrics:  metrics,
		Conditions:      hpa.Status.Conditions,
	}
	if c.generation {
		g := hpa.Generation
		hpa.Status.ObservedGeneration = &g
	}
	if rescaled {
		t := metav1.NewTime(now)
		hpa.Status.LastScaleTime = &t
	}
}

// updateStatusIfNeeded writes the status when it changed.
func (c *controller) updateStatusIfNeeded(ctx context.Context,
	old *autoscalingv2.HorizontalPodAutoscalerStatus,
	hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if equality.Semantic.DeepEqual(old, &hpa.Status) {
		return nil
	}
	written, err := c.hpaClient.HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa,
		metav1.UpdateOptions{})
	if err != nil {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %w", hpa.Name, err)
	}
	if c.staleGuard {
		c.loop.Wrote(hpa.Namespace+"/"+hpa.Name, written)
	}
	logr.FromContextOrDiscard(ctx).V(2).Info("Successfully updated status", "HPA",
		hpa.Namespace+"/"+hpa.Name)
	return nil
}

// setCondition sets a condition's status, reason and message; its
// transition time moves only when its status changes.
func setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler,
	t autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus,
	reason, message string, now time.Time) {
	var cond *autoscalingv2.HorizontalPodAutoscalerCondition
	for i := range hpa.Status.Conditions {
		if hpa.Status.Conditions[i].Type == t {
			cond = &hpa.Status.Conditions[i]
			break
		}
	}
	if cond == nil {
		hpa.Status.Conditions = append(hpa.Status.Conditions,
			autoscalingv2.HorizontalPodAutoscalerCondition{Type: t})
		cond = &hpa.Status.Conditions[len(hpa.Status.Conditions)-1]
	}
	if cond.Status != status {
		cond.LastTransitionTime = metav1.NewTime(now)
	}
	cond.Status, cond.Reason, cond.Message = status, reason, message
}

func removeCondition(hpa *autoscalingv2.HorizontalPodAutoscaler,
	t autoscalingv2.HorizontalPodAutoscalerConditionType) {
	kept := hpa.Status.Conditions[:0]
	for _, cond := range hpa.Status.Conditions {
		if cond.Type != t {
			kept = append(kept, cond)
		}
	}
	hpa.Status.Conditions = kept
}

func conditionTrue(hpa *autoscalingv2.HorizontalPodAutoscaler,
	t autoscalingv2.HorizontalPodAutoscalerConditionType) bool {
	for _, cond := range hpa.Status.Conditions {
		if cond.Type == t {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasObjectOrExternal(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.ObjectMetricSourceType ||
			m.Type == autoscalingv2.ExternalMetricSourceType {
			return true
		}
	}
	return false
}

// defaultBehavior fills what the API server defaults in a behaviour
// (rules, their policies, selectPolicy, the scale-up window), for an HPA
// that reached the cache without it (KCM would panic on it).
func defaultBehavior(b *autoscalingv2.HorizontalPodAutoscalerBehavior) {
	if b.ScaleUp == nil {
		b.ScaleUp = &autoscalingv2.HPAScalingRules{}
	}
	if b.ScaleUp.Policies == nil {
		b.ScaleUp.Policies = []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		}
	}
	if b.ScaleUp.StabilizationWindowSeconds == nil {
		b.ScaleUp.StabilizationWindowSeconds = new(int32)
	}
	if b.ScaleDown == nil {
		b.ScaleDown = &autoscalingv2.HPAScalingRules{}
	}
	if b.ScaleDown.Policies == nil {
		b.ScaleDown.Policies = []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		}
	}
	for _, r := range []*autoscalingv2.HPAScalingRules{b.ScaleUp, b.ScaleDown} {
		if r.SelectPolicy == nil {
			r.SelectPolicy = new(autoscalingv2.MaxChangePolicySelect)
		}
	}
}
