package namespace

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "namespace-controller"
	Alias = "namespace"
)

// KCM's defaults.
const (
	defaultConcurrentNamespaceSyncs = 10
	defaultNamespaceSyncPeriod      = 5 * time.Minute
)

// Options configures the controller. Start from NewOptions: a zero worker
// count is reported, not defaulted, so that --concurrent-namespace-syncs=0
// does not leave namespaces stuck in Terminating.
type Options struct {
	// ConcurrentNamespaceSyncs is --concurrent-namespace-syncs: how many
	// namespaces are emptied at once. Default: 10. Must be at least 1.
	ConcurrentNamespaceSyncs int32
	// NamespaceSyncPeriod is --namespace-sync-period: how often every
	// namespace is looked at again, besides its updates. Default: 5m. Zero
	// turns the periodic pass off (as client-go's informers take it);
	// negative is invalid.
	NamespaceSyncPeriod time.Duration

	// Clock dates conditions and times the pods' grace periods; tests
	// inject a fake one. Default (nil): the real clock.
	Clock clock.PassiveClock
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{
		ConcurrentNamespaceSyncs: defaultConcurrentNamespaceSyncs,
		NamespaceSyncPeriod:      defaultNamespaceSyncPeriod,
	}
}

// AddFlags binds o to KCM's flags, with KCM's help texts and o's current
// values as the defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.NamespaceSyncPeriod, "namespace-sync-period", o.NamespaceSyncPeriod,
		"The period for syncing namespace life-cycle updates")
	fs.Int32Var(
		&o.ConcurrentNamespaceSyncs,
		"concurrent-namespace-syncs",
		o.ConcurrentNamespaceSyncs,
		"The number of namespace objects that are allowed to sync concurrently. Larger number = more "+
			"responsive namespace termination, but more CPU (and network) load",
	)
}

// Validate reports every invalid field, naming its flag.
func (o Options) Validate() error {
	var errs []error
	if o.ConcurrentNamespaceSyncs < 1 {
		errs = append(
			errs,
			fmt.Errorf(
				"--concurrent-namespace-syncs: must be at least 1, got %d",
				o.ConcurrentNamespaceSyncs,
			),
		)
	}
	if o.NamespaceSyncPeriod < 0 {
		errs = append(
			errs,
			fmt.Errorf(
				"--namespace-sync-period: must not be negative (0 turns the periodic sync off), got %v",
				o.NamespaceSyncPeriod,
			),
		)
	}
	return errors.Join(errs...)
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}
