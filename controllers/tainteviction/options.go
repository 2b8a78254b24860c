package tainteviction

import (
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/clock"
)

// Name is the controller's name in --controllers, as in KCM (which gives
// it no alias).
const Name = "taint-eviction-controller"

// clientName is the client KCM gives the controller: the node lifecycle
// controller's, whose ServiceAccount and RBAC it shares.
const clientName = "node-controller"

// eventReason is the reason of the events the controller records on pods
// it marks for deletion, or whose deletion it cancels, as KCM's.
const eventReason = "TaintManagerEviction"

// The DisruptionTarget condition the controller sets on a pod before it
// deletes it, as KCM's.
const (
	ConditionReason  = "DeletionByTaintManager"
	conditionMessage = "Taint manager: deleting due to NoExecute taint"
)

// FeatureSeparateTaintEvictionController is the gate KCM starts the
// controller under: GA and locked on since Kubernetes 1.34. With it off
// the controller does not start.
const FeatureSeparateTaintEvictionController featuregate.Feature = "SeparateTaintEvictionController"

// FeatureTaintTolerationComparisonOperators lets a toleration's Lt and Gt
// operators match a taint whose value is an integer (alpha, off in
// Kubernetes 1.37). With it off such a toleration tolerates nothing.
const FeatureTaintTolerationComparisonOperators = featuregate.Feature(
	"TaintTolerationComparisonOperators")

// FeatureSpecs returns the gates the controller reads with their
// Kubernetes 1.37 defaults, for a program to add to its feature gate.
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeatureSeparateTaintEvictionController: {Default: true, PreRelease: featuregate.GA,
			LockToDefault: true},
		FeatureTaintTolerationComparisonOperators: {Default: false,
			PreRelease: featuregate.Alpha},
	}
}

// Options configures the controller. KCM has no flag for it: the zero
// value is KCM's behaviour.
type Options struct {
	// Clock times tolerations and stamps the DisruptionTarget condition;
	// tests inject a fake one. Default (nil): the real clock.
	Clock clock.WithDelayedExecution
}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{} }

// AddFlags registers nothing: KCM has no flag for this controller. It
// exists so that every built-in controller package has the same shape.
func (o *Options) AddFlags(*pflag.FlagSet) {}

var (
	pods  = corev1.SchemeGroupVersion.WithResource("pods")
	nodes = corev1.SchemeGroupVersion.WithResource("nodes")
)
