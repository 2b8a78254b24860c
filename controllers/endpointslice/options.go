package endpointslice

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "endpointslice-controller"
	Alias = "endpointslice"
)

// eventSource is the source component of the controller's events, KCM's.
const eventSource = "endpoint-slice-controller"

// managedBy is the endpointslice.kubernetes.io/managed-by value on the
// EndpointSlices this controller owns, KCM's, so that either may take
// over from the other.
const managedBy = "endpointslice-controller.k8s.io"

// KCM's defaults and bounds.
const (
	defaultConcurrentServiceEndpointSyncs = 5
	defaultMaxEndpointsPerSlice           = 100
	maxConcurrentServiceEndpointSyncs     = 50
	maxMaxEndpointsPerSlice               = 1000
)

// FeaturePreferSameTrafficDistribution lets Services ask for the
// PreferSameZone and PreferSameNode traffic distributions (GA and locked on
// since 1.35). It is consulted through descriptor.Context.FeatureGate when
// the host registers it; otherwise its Kubernetes 1.37 default applies.
const FeaturePreferSameTrafficDistribution featuregate.Feature = "PreferSameTrafficDistribution"

// FeatureSpecs returns the gates this controller reads with their
// Kubernetes 1.37 defaults, for a program to add to its feature gate.
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeaturePreferSameTrafficDistribution: {
			Default:       true,
			PreRelease:    featuregate.GA,
			LockToDefault: true,
		},
	}
}

// Options configures the controller. Use NewOptions for KCM's defaults.
type Options struct {
	// ConcurrentServiceEndpointSyncs is --concurrent-service-endpoint-syncs:
	// how many Services are synced at once. Default: 5; the valid range is
	// 1 to 50, as in KCM (0 is an error: start from NewOptions).
	ConcurrentServiceEndpointSyncs int32
	// MaxEndpointsPerSlice is --max-endpoints-per-slice: the most endpoints
	// one EndpointSlice holds. Default: 100; the valid range is 1 to 1000,
	// as in KCM (0 is an error).
	MaxEndpointsPerSlice int32
	// EndpointUpdatesBatchPeriod is --endpointslice-updates-batch-period:
	// how long a Service's sync is delayed after a pod change, to batch
	// further changes into the same update. Default 0 (no delay).
	EndpointUpdatesBatchPeriod time.Duration
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{
		ConcurrentServiceEndpointSyncs: defaultConcurrentServiceEndpointSyncs,
		MaxEndpointsPerSlice:           defaultMaxEndpointsPerSlice,
	}
}

// AddFlags binds KCM's flags for this controller to o, o's current values
// being the defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(
		&o.ConcurrentServiceEndpointSyncs,
		"concurrent-service-endpoint-syncs",
		o.ConcurrentServiceEndpointSyncs,
		"The number of service endpoint syncing operations that will be done concurrently. Larger "+
			"number = faster endpoint slice updating, but more CPU (and network) load. Defaults to 5.",
	)
	fs.Int32Var(
		&o.MaxEndpointsPerSlice,
		"max-endpoints-per-slice",
		o.MaxEndpointsPerSlice,
		"The maximum number of endpoints that will be added to an EndpointSlice. More endpoints per "+
			"slice will result in less endpoint slices, but larger resources. Defaults to 100.",
	)
	fs.DurationVar(
		&o.EndpointUpdatesBatchPeriod,
		"endpointslice-updates-batch-period",
		o.EndpointUpdatesBatchPeriod,
		"The length of endpoint slice updates batching period. Processing of pod changes will be "+
			"delayed by this duration to join them with potential upcoming updates and reduce the overall "+
			"number of endpoints updates. Larger number = higher endpoint programming latency, but lower "+
			"number of endpoints revision generated",
	)
}

func (o Options) withDefaults() Options {
	if o.ConcurrentServiceEndpointSyncs == 0 {
		o.ConcurrentServiceEndpointSyncs = defaultConcurrentServiceEndpointSyncs
	}
	if o.MaxEndpointsPerSlice == 0 {
		o.MaxEndpointsPerSlice = defaultMaxEndpointsPerSlice
	}
	return o
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	var errs []error
	if n := o.ConcurrentServiceEndpointSyncs; n < 1 || n > maxConcurrentServiceEndpointSyncs {
		errs = append(
			errs,
			fmt.Errorf(
				"--concurrent-service-endpoint-syncs: must be between 1 and %d, got %d",
				maxConcurrentServiceEndpointSyncs,
				n,
			),
		)
	}
	if n := o.MaxEndpointsPerSlice; n < 1 || n > maxMaxEndpointsPerSlice {
		errs = append(
			errs,
			fmt.Errorf(
				"--max-endpoints-per-slice: must be between 1 and %d, got %d",
				maxMaxEndpointsPerSlice,
				n,
			),
		)
	}
	if o.EndpointUpdatesBatchPeriod < 0 {
		errs = append(
			errs,
			fmt.Errorf(
				"--endpointslice-updates-batch-period: must not be negative, got %v",
				o.EndpointUpdatesBatchPeriod,
			),
		)
	}
	return errors.Join(errs...)
}
