package daemonset

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
)

// defaultConcurrentDaemonSetSyncs is kube-controller-manager's default
// worker count (--concurrent-daemonset-syncs).
const defaultConcurrentDaemonSetSyncs = 2

// burstReplicas is the most pods one sync creates, and the most it deletes
// (kube-controller-manager's value); the rest wait until those have been
// observed.
const burstReplicas = 250

// Options configures the controller. Start from NewOptions.
type Options struct {
	// ConcurrentDaemonSetSyncs is --concurrent-daemonset-syncs: how many
	// DaemonSets are synced at once. Default: 2. Must be at least 1: as in
	// KCM, "--concurrent-daemonset-syncs=0" is reported, not defaulted.
	ConcurrentDaemonSetSyncs int32

	// Clock times failed-pod back-off, availability (minReadySeconds) and
	// expectations; tests inject a fake one. Default (nil): the real clock.
	Clock clock.WithTicker
}

// NewOptions returns kube-controller-manager's defaults.
func NewOptions() Options {
	return Options{ConcurrentDaemonSetSyncs: defaultConcurrentDaemonSetSyncs}
}

// AddFlags binds --concurrent-daemonset-syncs to o, with KCM's name and
// help and o's current value as the default.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(
		&o.ConcurrentDaemonSetSyncs,
		"concurrent-daemonset-syncs",
		o.ConcurrentDaemonSetSyncs,
		"The number of daemonset objects that are allowed to sync concurrently. Larger number = more "+
			"responsive daemonsets, but more CPU (and network) load",
	)
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	if o.ConcurrentDaemonSetSyncs < 1 {
		return fmt.Errorf(
			"--concurrent-daemonset-syncs: must be at least 1, got %d",
			o.ConcurrentDaemonSetSyncs,
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
