package statefulset

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/clock"
)

// Names, as kube-controller-manager has them.
const (
	Name  = "statefulset-controller"
	Alias = "statefulset"
	// clientName is the name KCM asks its client builder for: the user
	// agent's suffix and, with --use-service-account-credentials, the
	// ServiceAccount (kube-system/statefulset-controller) whose bootstrap
	// RBAC role grants what this controller does.
	clientName = "statefulset-controller"
)

// defaultConcurrentStatefulSetSyncs is kube-controller-manager's default
// worker count (--concurrent-statefulset-syncs).
const defaultConcurrentStatefulSetSyncs = 5

// Feature gates consulted through descriptor.Context.FeatureGate when the
// host registers them; otherwise their Kubernetes 1.37 defaults apply.
const (
	// FeatureMaxUnavailable: a RollingUpdate takes down up to
	// rollingUpdate.maxUnavailable pods at once (beta, on by default
	// since 1.37); off, one at a time, as before.
	FeatureMaxUnavailable featuregate.Feature = "MaxUnavailableStatefulSet"
	// FeatureStaleControllerConsistency: hold a StatefulSet back until
	// the informers have delivered the pods, claims and status this
	// controller wrote for it (beta, on by default since 1.36).
	FeatureStaleControllerConsistency featuregate.Feature = "StaleControllerConsistencyStatefulSet"
	// FeatureSemanticRevisionComparison: a StatefulSet whose newest
	// revision's bytes differ from what this controller would write, but
	// which restores to the same template, keeps that revision (beta, on
	// by default).
	FeatureSemanticRevisionComparison featuregate.Feature = "StatefulSetSemanticRevisionComparison"
	// FeatureRecreateStrategy: the Recreate update strategy deletes every
	// outdated pod, waits for them all to go, then makes the new ones
	// (alpha, off by default in 1.37; the API server accepts the strategy
	// only under its own gate of that name).
	FeatureRecreateStrategy featuregate.Feature = "StatefulSetRecreateStrategy"
)

// FeatureSpecs returns the gates above with their Kubernetes 1.37
// defaults, for a program to add to its feature gate (so that
// --feature-gates can set them).
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeatureMaxUnavailable:             {Default: true, PreRelease: featuregate.Beta},
		FeatureStaleControllerConsistency: {Default: true, PreRelease: featuregate.Beta},
		FeatureSemanticRevisionComparison: {Default: true, PreRelease: featuregate.Beta},
		FeatureRecreateStrategy:           {Default: false, PreRelease: featuregate.Alpha},
	}
}

// Options configures the controller. Start from NewOptions.
type Options struct {
	// ConcurrentStatefulSetSyncs is --concurrent-statefulset-syncs: how
	// many StatefulSets are synced at once. Default: 5. Must be at least
	// 1: as in KCM, 0 is reported, not defaulted.
	ConcurrentStatefulSetSyncs int32

	// Clock times availability (minReadySeconds); tests inject a fake
	// one. Default (nil): the real clock.
	Clock clock.WithTicker
}

// NewOptions returns kube-controller-manager's defaults.
func NewOptions() Options {
	return Options{ConcurrentStatefulSetSyncs: defaultConcurrentStatefulSetSyncs}
}

// AddFlags binds --concurrent-statefulset-syncs to o, with KCM's name and
// help and o's current value as the default.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentStatefulSetSyncs, "concurrent-statefulset-syncs",
		o.ConcurrentStatefulSetSyncs,
		"The number of statefulset objects that are allowed to sync concurrently. "+
			"Larger number = more responsive statefulsets, but more CPU (and network) load")
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	if o.ConcurrentStatefulSetSyncs < 1 {
		return fmt.Errorf("--concurrent-statefulset-syncs (ConcurrentStatefulSetSyncs): "+
			"must be at least 1, got %d", o.ConcurrentStatefulSetSyncs)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}
