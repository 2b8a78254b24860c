package hpa

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spf13/pflag"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/clock"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "horizontal-pod-autoscaler-controller"
	Alias = "horizontalpodautoscaling"
)

// clientName is KCM's name for the controller's clients and
// ServiceAccount; eventSource is the component its events name.
const (
	clientName  = "horizontal-pod-autoscaler"
	eventSource = "horizontal-pod-autoscaler"
)

// KCM's defaults.
const (
	defaultConcurrentSyncs         = 5
	defaultSyncPeriod              = 15 * time.Second
	defaultDownscaleStabilization  = 5 * time.Minute
	DefaultTolerance               = 0.1
	defaultCPUInitializationPeriod = 5 * time.Minute
	defaultInitialReadinessDelay   = 30 * time.Second
)

// Feature gates consulted through descriptor.Context.FeatureGate when the
// host registers them; otherwise their Kubernetes 1.37 defaults apply.
const (
	// FeatureHPAConfigurableTolerance: spec.behavior.scaleUp/scaleDown
	// tolerance override --horizontal-pod-autoscaler-tolerance (GA, locked
	// on in 1.37).
	FeatureHPAConfigurableTolerance featuregate.Feature = "HPAConfigurableTolerance"
	// FeatureHPAGeneration: status.observedGeneration is written, and a
	// spec change (a new generation) is synced at once rather than after
	// the sync period (beta, on in 1.37).
	FeatureHPAGeneration featuregate.Feature = "HPAGeneration"
	// FeatureHPAScaleToZero: minReplicas 0 with object or external metrics
	// scales to zero and back, tracked by the ScaledToZero condition
	// (beta, on in 1.37).
	FeatureHPAScaleToZero featuregate.Feature = "HPAScaleToZero"
	// FeatureHPAOptimizedSelectorStore picks KCM's store of HPA selectors
	// (beta, on in 1.37). Both of KCM's stores answer alike; ctrlhost has
	// one, and the gate changes nothing here.
	FeatureHPAOptimizedSelectorStore featuregate.Feature = "HPAOptimizedSelectorStore"
	// FeatureStaleControllerConsistencyHPA: after writing an HPA's status,
	// skip its syncs until the informer has delivered the write (beta, on
	// in 1.37).
	FeatureStaleControllerConsistencyHPA featuregate.Feature = "StaleControllerConsistencyHPA"
	// FeaturePodLevelResources: utilization is of the pod-level request
	// when a pod sets one and the metric names no container (beta, on).
	FeaturePodLevelResources featuregate.Feature = "PodLevelResources"
)

// FeatureSpecs returns the gates above with their Kubernetes 1.37
// defaults, for a program to add to its feature gate.
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeatureHPAConfigurableTolerance: {Default: true, PreRelease: featuregate.GA,
			LockToDefault: true},
		FeatureHPAGeneration:                 {Default: true, PreRelease: featuregate.Beta},
		FeatureHPAScaleToZero:                {Default: true, PreRelease: featuregate.Beta},
		FeatureHPAOptimizedSelectorStore:     {Default: true, PreRelease: featuregate.Beta},
		FeatureStaleControllerConsistencyHPA: {Default: true, PreRelease: featuregate.Beta},
		FeaturePodLevelResources:             {Default: true, PreRelease: featuregate.Beta},
	}
}

// Options configures the controller, under KCM's flag names. Start from
// NewOptions.
type Options struct {
	// ConcurrentSyncs is --concurrent-horizontal-pod-autoscaler-syncs.
	// Default: 5. Must be at least 1.
	ConcurrentSyncs int32
	// SyncPeriod is --horizontal-pod-autoscaler-sync-period: how often
	// each HPA is reconciled. Default: 15s. Must be positive.
	SyncPeriod time.Duration
	// DownscaleStabilization is
	// --horizontal-pod-autoscaler-downscale-stabilization: the window of
	// recommendations a scale-down takes the highest of. Default: 5m.
	DownscaleStabilization time.Duration
	// Tolerance is --horizontal-pod-autoscaler-tolerance: the change of
	// the usage ratio from 1.0 below which nothing scales. Default: 0.1.
	Tolerance float64
	// CPUInitializationPeriod is
	// --horizontal-pod-autoscaler-cpu-initialization-period: after a
	// pod's start, CPU samples may be skipped. Default: 5m.
	CPUInitializationPeriod time.Duration
	// InitialReadinessDelay is
	// --horizontal-pod-autoscaler-initial-readiness-delay: after a pod's
	// start, readiness changes count as initial readiness. Default: 30s.
	InitialReadinessDelay time.Duration

	// Clock times recommendations, scale events, lastScaleTime and the
	// CPU initialization period; tests inject a fake one. Default: the
	// real clock.
	Clock clock.PassiveClock
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{
		ConcurrentSyncs:         defaultConcurrentSyncs,
		SyncPeriod:              defaultSyncPeriod,
		DownscaleStabilization:  defaultDownscaleStabilization,
		Tolerance:               DefaultTolerance,
		CPUInitializationPeriod: defaultCPUInitializationPeriod,
		InitialReadinessDelay:   defaultInitialReadinessDelay,
	}
}

// AddFlags binds KCM's flags to o, with KCM's names and help and o's
// current values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentSyncs, "concurrent-horizontal-pod-autoscaler-syncs",
		o.ConcurrentSyncs, "The number of horizontal pod autoscaler objects that are allowed to "+
			"sync concurrently. Larger number = more responsive horizontal pod autoscaler "+
			"objects processing, but more CPU (and network) load.")
	fs.DurationVar(&o.SyncPeriod, "horizontal-pod-autoscaler-sync-period", o.SyncPeriod,
		"The period for syncing the number of pods in horizontal pod autoscaler.")
	fs.DurationVar(&o.DownscaleStabilization, "horizontal-pod-autoscaler-downscale-stabilization",
		o.DownscaleStabilization, "The period for which autoscaler will look backwards and not "+
			"scale down below any recommendation it made during that period.")
	fs.Float64Var(&o.Tolerance, "horizontal-pod-autoscaler-tolerance", o.Tolerance,
		"The minimum change (from 1.0) in the desired-to-actual metrics ratio for the "+
			"horizontal pod autoscaler to consider scaling.")
	fs.DurationVar(&o.CPUInitializationPeriod,
		"horizontal-pod-autoscaler-cpu-initialization-period", o.CPUInitializationPeriod,
		"The period after pod start when CPU samples might be skipped.")
	fs.DurationVar(&o.InitialReadinessDelay, "horizontal-pod-autoscaler-initial-readiness-delay",
		o.InitialReadinessDelay, "The period after pod start during which readiness changes "+
			"will be treated as initial readiness.")
}

// Validate reports every invalid field. KCM checks only the worker count;
// a sync period of zero or less, which would make KCM's queue spin, and
// a negative or non-finite tolerance or duration are refused here too.
func (o Options) Validate() error {
	var errs []error
	if o.ConcurrentSyncs < 1 {
		errs = append(errs, fmt.Errorf(
			"--concurrent-horizontal-pod-autoscaler-syncs: must be at least 1, got %d",
			o.ConcurrentSyncs))
	}
	if o.SyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf(
			"--horizontal-pod-autoscaler-sync-period: must be positive, got %v", o.SyncPeriod))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--horizontal-pod-autoscaler-downscale-stabilization", o.DownscaleStabilization},
		{"--horizontal-pod-autoscaler-cpu-initialization-period", o.CPUInitializationPeriod},
		{"--horizontal-pod-autoscaler-initial-readiness-delay", o.InitialReadinessDelay},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %v", d.flag, d.v))
		}
	}
	if o.Tolerance < 0 || math.IsNaN(o.Tolerance) || math.IsInf(o.Tolerance, 0) {
		errs = append(errs, fmt.Errorf(
			"--horizontal-pod-autoscaler-tolerance: must be a finite number at least 0, got %v",
			o.Tolerance))
	}
	return errors.Join(errs...)
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

var (
	hpas = autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers")
	pods = corev1.SchemeGroupVersion.WithResource("pods")
)

// podReads are the fields of a pod the controller reads besides its
// metadata (labels to match selectors, the deletion timestamp).
var podReads = []string{
	// Which pods are ready, pending, failed, and since when.
	"status.phase",
	"status.conditions",
	"status.startTime",
	// The requests utilization is a percentage of (containers, sidecars,
	// pod-level requests and overhead, as component-helpers sums them).
	"spec.containers.name",
	"spec.containers.resources",
	"spec.initContainers.name",
	"spec.initContainers.restartPolicy",
	"spec.initContainers.resources",
	"spec.resources",
	"spec.overhead",
}
