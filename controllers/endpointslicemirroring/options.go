package endpointslicemirroring

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "endpointslice-mirroring-controller"
	Alias = "endpointslicemirroring"
)

// eventSource is the source component of the controller's events, KCM's.
const eventSource = "endpoint-slice-mirroring-controller"

// ManagedBy is the endpointslice.kubernetes.io/managed-by value on the
// EndpointSlices this controller mirrors, KCM's, so that either may take
// over from the other.
const ManagedBy = "endpointslicemirroring-controller.k8s.io"

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "endpointslicemirroring-controller"

// KCM's defaults and bounds.
const (
	defaultConcurrentServiceEndpointSyncs = 5
	defaultMaxEndpointsPerSubset          = 1000
	maxConcurrentServiceEndpointSyncs     = 50
	maxMaxEndpointsPerSubset              = 1000
)

// Options configures the controller. Use NewOptions for KCM's defaults.
type Options struct {
	// ConcurrentServiceEndpointSyncs is
	// --mirroring-concurrent-service-endpoint-syncs: how many Endpoints are
	// mirrored at once. Default: 5; the valid range is 1 to 50, as in KCM
	// (0 is an error: start from NewOptions).
	ConcurrentServiceEndpointSyncs int32
	// MaxEndpointsPerSubset is --mirroring-max-endpoints-per-subset: the
	// most addresses of one Endpoints subset that are mirrored (the rest
	// are skipped, with a TooManyAddressesToMirror event). Default: 1000;
	// the valid range is 1 to 1000, as in KCM (0 is an error).
	MaxEndpointsPerSubset int32
	// EndpointUpdatesBatchPeriod is
	// --mirroring-endpointslice-updates-batch-period: how long a sync
	// caused by a change to a mirrored EndpointSlice is delayed, to batch
	// further changes into it. Default 0 (no delay).
	EndpointUpdatesBatchPeriod time.Duration
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{
		ConcurrentServiceEndpointSyncs: defaultConcurrentServiceEndpointSyncs,
		MaxEndpointsPerSubset:          defaultMaxEndpointsPerSubset,
	}
}

// AddFlags binds KCM's flags for this controller to o, o's current values
// being the defaults. The help texts are KCM's (whose text for
// --mirroring-max-endpoints-per-subset says 100; its default is 1000).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentServiceEndpointSyncs, "mirroring-concurrent-service-endpoint-syncs",
		o.ConcurrentServiceEndpointSyncs,
		"The number of service endpoint syncing operations that will be done concurrently by the "+
			Name+". Larger number = faster endpoint slice updating, but more CPU (and network) "+
			"load. Defaults to 5.")
	fs.Int32Var(&o.MaxEndpointsPerSubset, "mirroring-max-endpoints-per-subset",
		o.MaxEndpointsPerSubset,
		"The maximum number of endpoints that will be added to an EndpointSlice by the "+Name+
			". More endpoints per slice will result in less endpoint slices, but larger "+
			"resources. Defaults to 100.")
	fs.DurationVar(&o.EndpointUpdatesBatchPeriod, "mirroring-endpointslice-updates-batch-period",
		o.EndpointUpdatesBatchPeriod,
		"The length of EndpointSlice updates batching period for "+Name+". Processing of "+
			"EndpointSlice changes will be delayed by this duration to join them with potential "+
			"upcoming updates and reduce the overall number of EndpointSlice updates. Larger "+
			"number = higher endpoint programming latency, but lower number of endpoints "+
			"revision generated")
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	var errs []error
	if n := o.ConcurrentServiceEndpointSyncs; n < 1 || n > maxConcurrentServiceEndpointSyncs {
		errs = append(errs, fmt.Errorf(
			"--mirroring-concurrent-service-endpoint-syncs: must be between 1 and %d, got %d",
			maxConcurrentServiceEndpointSyncs, n))
	}
	if n := o.MaxEndpointsPerSubset; n < 1 || n > maxMaxEndpointsPerSubset {
		errs = append(errs, fmt.Errorf(
			"--mirroring-max-endpoints-per-subset: must be between 1 and %d, got %d",
			maxMaxEndpointsPerSubset, n))
	}
	if o.EndpointUpdatesBatchPeriod < 0 {
		errs = append(errs, fmt.Errorf(
			"--mirroring-endpointslice-updates-batch-period: must not be negative, got %v",
			o.EndpointUpdatesBatchPeriod))
	}
	return errors.Join(errs...)
}
