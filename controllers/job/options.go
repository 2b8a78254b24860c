package job

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "job-controller"
	Alias = "job"
)

// defaultConcurrentJobSyncs is KCM's default worker count.
const defaultConcurrentJobSyncs = 5

// Options configures the controller. Start from NewOptions; a zero worker
// count is invalid, not defaulted, so that "--concurrent-job-syncs=0" is
// reported rather than ignored (KCM rejects it too).
type Options struct {
	// ConcurrentJobSyncs is --concurrent-job-syncs: how many Jobs are
	// synced at once. Default: 5. Must be at least 1.
	ConcurrentJobSyncs int32

	// Clock times pod-creation back-off, activeDeadlineSeconds, condition
	// times and delayed syncs; tests inject a fake one. Default (nil): the
	// real clock.
	Clock clock.WithTicker
}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{ConcurrentJobSyncs: defaultConcurrentJobSyncs} }

// AddFlags binds --concurrent-job-syncs to o, with KCM's name and help and
// o's current value as the default.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(
		&o.ConcurrentJobSyncs,
		"concurrent-job-syncs",
		o.ConcurrentJobSyncs,
		"The number of job objects that are allowed to sync concurrently. Larger number = more "+
			"responsive jobs, but more CPU (and network) load",
	)
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	if o.ConcurrentJobSyncs < 1 {
		return fmt.Errorf(
			"--concurrent-job-syncs: must be at least 1, got %d",
			o.ConcurrentJobSyncs,
		)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}
