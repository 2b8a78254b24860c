package ttlafterfinished

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "ttl-after-finished-controller"
	Alias = "ttl-after-finished"
)

// defaultConcurrentTTLSyncs is KCM's default worker count.
const defaultConcurrentTTLSyncs = 5

// Options configures the controller. Use NewOptions for KCM's defaults.
type Options struct {
	// ConcurrentTTLSyncs is --concurrent-ttl-after-finished-syncs: how many
	// Jobs are processed at once. Zero means the default, 5 (as KCM's
	// configuration defaulting does); negative is invalid.
	ConcurrentTTLSyncs int32

	// Clock tells when a Job's TTL has passed; tests inject a fake one.
	// Default (nil): the real clock.
	Clock clock.PassiveClock
}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{ConcurrentTTLSyncs: defaultConcurrentTTLSyncs} }

// AddFlags binds --concurrent-ttl-after-finished-syncs to o, with KCM's name
// and help and o's current value as the default.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentTTLSyncs, "concurrent-ttl-after-finished-syncs", o.ConcurrentTTLSyncs,
		fmt.Sprintf("The number of %s workers that are allowed to sync concurrently.", Name))
}

func (o Options) withDefaults() Options {
	if o.ConcurrentTTLSyncs == 0 {
		o.ConcurrentTTLSyncs = defaultConcurrentTTLSyncs
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	if o.ConcurrentTTLSyncs < 0 {
		return fmt.Errorf(
			"--concurrent-ttl-after-finished-syncs: must be at least 1, got %d",
			o.ConcurrentTTLSyncs,
		)
	}
	return nil
}
