// Package hpa is kube-controller-manager's horizontal-pod-autoscaler
// controller, native: it scales the targets of autoscaling/v2
// HorizontalPodAutoscalers through their scale subresource on what the
// metrics APIs report, and keeps the HPAs' status.
//
// Guarantees, as KCM v1.37 does it:
//   - names: horizontal-pod-autoscaler-controller, alias
//     horizontalpodautoscaling; its clients and events are KCM's
//     "horizontal-pod-autoscaler"; flags and defaults are KCM's:
//     --concurrent-horizontal-pod-autoscaler-syncs (5),
//     --horizontal-pod-autoscaler-sync-period (15s),
//     --horizontal-pod-autoscaler-downscale-stabilization (5m),
//     --horizontal-pod-autoscaler-tolerance (0.1),
//     --horizontal-pod-autoscaler-cpu-initialization-period (5m),
//     --horizontal-pod-autoscaler-initial-readiness-delay (30s);
//   - each HPA is reconciled when added, when its generation changes
//     (HPAGeneration) and every sync period after its last sync, failures
//     included; other updates wait for the period;
//   - the target's scale is read and written through the scale
//     subresource (client-go/scale over the host's REST mapper, every
//     mapping of the target's kind tried in turn), a conflict re-read and
//     retried with client-go's default back-off;
//   - metrics: resource and container resource (utilization of the
//     request, or average value) from metrics.k8s.io; pods and object
//     metrics from custom.metrics.k8s.io (its preferred version found by
//     discovery, refreshed every sync period); external metrics from
//     external.metrics.k8s.io; the highest count of the metrics that
//     worked wins; if every metric failed, or some failed and the rest
//     would scale down, nothing scales;
//   - KCM's replica calculator: tolerance (the flag, or the behaviour's
//     scaleUp/scaleDown tolerance under HPAConfigurableTolerance); deleted
//     and failed pods ignored; pending pods, and for CPU pods not ready
//     or within the CPU initialization period, unready; pods without a
//     sample missing; on a scale-up unready and missing pods count as
//     using nothing, on a scale-down missing pods as using their request
//     (or the target above 100%); no scale when that would change the
//     direction; requests from containers, sidecars, or the pod-level
//     request (PodLevelResources);
//   - bounds: below minReplicas or above maxReplicas the target is brought
//     within them without metrics; a target at zero is left alone
//     (ScalingDisabled) unless it was scaled to zero by the HPA
//     (HPAScaleToZero, object or external metrics, ScaledToZero
//     condition); without behaviour, the highest recommendation of the
//     downscale window and a scale-up of at most twice the replicas (or
//     4); with behaviour, the scale-up and scale-down stabilization
//     windows, then the policies (Pods, Percent, selectPolicy Max, Min,
//     Disabled) over the scale events of their periods;
//   - conditions AbleToScale, ScalingActive, ScalingLimited (and
//     ScaledToZero) with KCM's reasons and messages, a transition time
//     only on a status change; status currentReplicas, desiredReplicas,
//     currentMetrics, lastScaleTime, observedGeneration (HPAGeneration),
//     written only when it changed;
//   - two HPAs whose targets select the same pods: AmbiguousSelector;
//   - KCM's events: SuccessfulRescale, FailedRescale, FailedGetScale,
//     FailedComputeMetricsReplicas, FailedGet*Metric,
//     SelectorRequired, InvalidSelector, AmbiguousSelector,
//     FailedUpdateStatus;
//   - after a status write the HPA's syncs wait for the informer to
//     deliver it (StaleControllerConsistencyHPA);
//   - KCM's metrics: reconciliations_total and
//     reconciliation_duration_seconds{action,error},
//     metric_computation_total and
//     metric_computation_duration_seconds{action,error,metric_type},
//     num_horizontal_pod_autoscalers, desired_replicas{namespace,hpa_name},
//     under horizontal_pod_autoscaler_controller_.
//
// Differences from KCM:
//   - a sync held back for a stale cache is retried after a second (or
//     on the HPA's next event), not after the sync period;
//   - of KCM's horizontal_pod_autoscaler_controller_* metrics,
//     stale_sync_skips_total is not exported: the kit counts those skips
//     as workloop_stale_syncs_skipped_total{controller}; the others are
//     registered on the host's registry, their gauges reset each term;
//   - an HPA whose behaviour lacks scaleUp, scaleDown or selectPolicy
//     (the API server always defaults them) gets the API server's
//     defaults; KCM would panic on it;
//   - the ambiguous-selector message names the other HPAs in name order
//     (KCM's order is a map's);
//   - HPAOptimizedSelectorStore picks between two stores in KCM that
//     answer alike; there is one here;
//   - Options.Validate refuses a sync period of zero or less and negative
//     or non-finite durations and tolerance, which KCM accepts.
//
// Non-guarantees: recommendations and scale events live in memory, as in
// KCM: a restart or a new leader starts the stabilization windows and
// policy periods afresh. Scaling follows the metrics APIs, which may lag.
// KCM's arithmetic is kept where it is odd: at zero status replicas an
// object or external metric's average reads 0/0, whatever the platform
// makes of that (KCM writes the same), and an external metric with a
// Value target scales the ready pods by the ratio of the sum.
// Not sharded: a target's pods may be selected by an HPA of the same
// namespace only, but the stabilization history of an HPA would move
// with its slot, and KCM does not shard it either.
//
// The controller needs a REST config (the metrics and scale clients are
// built from it): on a host over ready-made clients (unit tests on fake
// clientsets) it is not started, and logs why; the host's other
// controllers run.
package hpa
