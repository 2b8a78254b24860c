package resourcequota

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/clock"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "resourcequota-controller"
	Alias = "resourcequota"
)

// KCM's defaults.
const (
	defaultConcurrentResourceQuotaSyncs = 5
	defaultResourceQuotaSyncPeriod      = 5 * time.Minute
	// DiscoveryPeriod is how often the quotable resources are discovered
	// again (KCM's fixed 30 s).
	DiscoveryPeriod = 30 * time.Second
)

// FeaturePodLevelResources is the gate under which a pod's spec.resources
// (pod-level requests and limits) count instead of its containers' sum.
const FeaturePodLevelResources featuregate.Feature = "PodLevelResources"

// FeatureSpecs returns the gates above with their Kubernetes 1.37
// defaults, for a program to add to its feature gate.
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeaturePodLevelResources: {Default: true, PreRelease: featuregate.Beta},
	}
}

// Options configures the controller. Use NewOptions for KCM's defaults.
type Options struct {
	// ConcurrentResourceQuotaSyncs is --concurrent-resource-quota-syncs: how
	// many quotas are recalculated at once, in each of the two queues. Zero
	// means the default, 5; negative is invalid.
	ConcurrentResourceQuotaSyncs int32

	// ResourceQuotaSyncPeriod is --resource-quota-sync-period: how often
	// every quota's usage is recalculated in full. Zero means the default,
	// 5m; negative is invalid.
	ResourceQuotaSyncPeriod time.Duration

	// Clock decides when a deleted pod's grace period is over. Default
	// (nil): the real clock.
	Clock clock.PassiveClock
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{
		ConcurrentResourceQuotaSyncs: defaultConcurrentResourceQuotaSyncs,
		ResourceQuotaSyncPeriod:      defaultResourceQuotaSyncPeriod,
	}
}

// AddFlags binds KCM's flags to o, with o's current values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(
		&o.ConcurrentResourceQuotaSyncs,
		"concurrent-resource-quota-syncs",
		o.ConcurrentResourceQuotaSyncs,
		"The number of resource quotas that are allowed to sync concurrently. Larger number = more "+
			"responsive quota management, but more CPU (and network) load",
	)
	fs.DurationVar(
		&o.ResourceQuotaSyncPeriod,
		"resource-quota-sync-period",
		o.ResourceQuotaSyncPeriod,
		"The period for syncing quota usage status in the system",
	)
}

func (o Options) withDefaults() Options {
	if o.ConcurrentResourceQuotaSyncs == 0 {
		o.ConcurrentResourceQuotaSyncs = defaultConcurrentResourceQuotaSyncs
	}
	if o.ResourceQuotaSyncPeriod == 0 {
		o.ResourceQuotaSyncPeriod = defaultResourceQuotaSyncPeriod
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	var errs []error
	if o.ConcurrentResourceQuotaSyncs < 0 {
		errs = append(
			errs,
			fmt.Errorf(
				"--concurrent-resource-quota-syncs: must be at least 1, got %d",
				o.ConcurrentResourceQuotaSyncs,
			),
		)
	}
	if o.ResourceQuotaSyncPeriod < 0 {
		errs = append(
			errs,
			fmt.Errorf(
				"--resource-quota-sync-period: must be positive (for example 5m), got %v",
				o.ResourceQuotaSyncPeriod,
			),
		)
	}
	return errors.Join(errs...)
}

// podReads are the fields of a pod the pod evaluator (pods.go) and the
// pods monitor's update filter (chargeChanged) read besides its metadata
// (deletionTimestamp and deletionGracePeriodSeconds: always kept).
var podReads = append([]string{
	// Whether its compute resources count: not terminal.
	"status.phase",
	// What it requests and limits: its containers' and init containers'
	// (which are sidecars: restartPolicy), the pod-level resources, the
	// overhead. The containers' also decide BestEffort when no QoS class
	// is reported.
	"spec.containers.name",
	"spec.containers.resources.requests",
	"spec.containers.resources.limits",
	"spec.initContainers.name",
	"spec.initContainers.restartPolicy",
	"spec.initContainers.resources.requests",
	"spec.initContainers.resources.limits",
	"spec.resources.requests",
	"spec.resources.limits",
	"spec.overhead",
	// In-place resize: what the kubelet allocated and actuated, by
	// container name, and whether it found the resize infeasible (the
	// PodResizePending condition's reason). A change of the actuated
	// resources recharges the pod.
	"status.containerStatuses.name",
	"status.containerStatuses.allocatedResources",
	"status.containerStatuses.resources",
	"status.initContainerStatuses.name",
	"status.initContainerStatuses.allocatedResources",
	"status.initContainerStatuses.resources",
	"status.conditions.type",
	"status.conditions.reason",
	// Scopes: Terminating, BestEffort (the QoS class as reported),
	// PriorityClass; CrossNamespacePodAffinity below.
	"spec.activeDeadlineSeconds",
	"status.qosClass",
	"spec.priorityClassName",
}, crossNamespaceReads()...)

// crossNamespaceReads are the fields the CrossNamespacePodAffinity scope
// reads: of every pod affinity and anti-affinity term, required or
// preferred, whether it names namespaces or a namespace selector.
func crossNamespaceReads() []string {
	var out []string
	for _, kind := range []string{"podAffinity", "podAntiAffinity"} {
		for _, terms := range []string{
			"requiredDuringSchedulingIgnoredDuringExecution",
			"preferredDuringSchedulingIgnoredDuringExecution.podAffinityTerm",
		} {
			for _, field := range []string{"namespaces", "namespaceSelector"} {
				out = append(out, "spec.affinity."+kind+"."+terms+"."+field)
			}
		}
	}
	return out
}
