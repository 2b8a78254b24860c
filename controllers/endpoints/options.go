package endpoints

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "endpoints-controller"
	Alias = "endpoint"
)

// clientName names the controller's API client (and, with
// --use-service-account-credentials, its ServiceAccount), as in KCM.
const clientName = "endpoint-controller"

// eventSource is the source component of the controller's events, KCM's.
const eventSource = "endpoint-controller"

// managedByLabel and managedBy mark the Endpoints this controller writes,
// with KCM's key and value.
const (
	managedByLabel = "endpoints.kubernetes.io/managed-by"
	managedBy      = "endpoint-controller"
)

// maxCapacity is how many addresses an Endpoints object keeps; beyond it the
// object is truncated and annotated endpoints.kubernetes.io/over-capacity:
// truncated, as in KCM.
const maxCapacity = 1000

// defaultConcurrentEndpointSyncs is KCM's default worker count.
const defaultConcurrentEndpointSyncs = 5

// Options configures the controller. Use NewOptions for KCM's defaults.
type Options struct {
	// ConcurrentEndpointSyncs is --concurrent-endpoint-syncs: how many
	// Services are synced at once. Zero means the default, 5 (as KCM's
	// configuration defaulting does); negative is invalid.
	ConcurrentEndpointSyncs int32
	// EndpointUpdatesBatchPeriod is --endpoint-updates-batch-period: how
	// long a Service's sync is delayed after a pod change, to batch further
	// changes into the same update. Default 0 (no delay); negative is
	// invalid.
	EndpointUpdatesBatchPeriod time.Duration
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{ConcurrentEndpointSyncs: defaultConcurrentEndpointSyncs}
}

// AddFlags binds KCM's flags for this controller to o, o's current values
// being the defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(
		&o.ConcurrentEndpointSyncs,
		"concurrent-endpoint-syncs",
		o.ConcurrentEndpointSyncs,
		"The number of endpoint syncing operations that will be done concurrently. Larger number = "+
			"faster endpoint updating, but more CPU (and network) load",
	)
	fs.DurationVar(
		&o.EndpointUpdatesBatchPeriod,
		"endpoint-updates-batch-period",
		o.EndpointUpdatesBatchPeriod,
		"The length of endpoint updates batching period. Processing of pod changes will be delayed by "+
			"this duration to join them with potential upcoming updates and reduce the overall number of "+
			"endpoints updates. Larger number = higher endpoint programming latency, but lower number of "+
			"endpoints revision generated",
	)
}

func (o Options) withDefaults() Options {
	if o.ConcurrentEndpointSyncs == 0 {
		o.ConcurrentEndpointSyncs = defaultConcurrentEndpointSyncs
	}
	return o
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	var errs []error
	if o.ConcurrentEndpointSyncs < 0 {
		errs = append(
			errs,
			fmt.Errorf(
				"--concurrent-endpoint-syncs: must be at least 1, got %d",
				o.ConcurrentEndpointSyncs,
			),
		)
	}
	if o.EndpointUpdatesBatchPeriod < 0 {
		errs = append(
			errs,
			fmt.Errorf(
				"--endpoint-updates-batch-period: must not be negative, got %v",
				o.EndpointUpdatesBatchPeriod,
			),
		)
	}
	return errors.Join(errs...)
}
