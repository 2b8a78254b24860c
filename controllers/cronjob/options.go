package cronjob

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "cronjob-controller"
	Alias = "cronjob"
)

// defaultConcurrentCronJobSyncs is KCM's default worker count.
const defaultConcurrentCronJobSyncs = 5

// Options configures the controller. Start from NewOptions; a zero worker
// count is invalid, not defaulted, so that "--concurrent-cron-job-syncs=0"
// is reported rather than ignored (KCM rejects it too).
type Options struct {
	// ConcurrentCronJobSyncs is --concurrent-cron-job-syncs: how many
	// CronJobs are synced at once. Default: 5. Must be at least 1.
	ConcurrentCronJobSyncs int32

	// Clock tells the time schedules are compared with and times requeues;
	// tests inject a fake one. Default (nil): the real clock.
	Clock clock.WithTicker
}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{ConcurrentCronJobSyncs: defaultConcurrentCronJobSyncs} }

// AddFlags binds --concurrent-cron-job-syncs to o, with KCM's name and help
// and o's current value as the default.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(
		&o.ConcurrentCronJobSyncs,
		"concurrent-cron-job-syncs",
		o.ConcurrentCronJobSyncs,
		"The number of cron job objects that are allowed to sync concurrently. Larger number = more "+
			"responsive jobs, but more CPU (and network) load",
	)
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	if o.ConcurrentCronJobSyncs < 1 {
		return fmt.Errorf(
			"--concurrent-cron-job-syncs: must be at least 1, got %d",
			o.ConcurrentCronJobSyncs,
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
