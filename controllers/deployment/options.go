package deployment

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
)

// defaultConcurrentDeploymentSyncs is KCM's default worker count.
const defaultConcurrentDeploymentSyncs = 5

// Options configures the controller. Start from NewOptions; a zero worker
// count is invalid, not defaulted, so that
// "--concurrent-deployment-syncs=0" is reported rather than ignored.
type Options struct {
	// ConcurrentDeploymentSyncs is how many Deployments are synced at once
	// (--concurrent-deployment-syncs). Default: 5. Must be at least 1.
	ConcurrentDeploymentSyncs int32

	// Clock times conditions and progress deadlines; tests inject a fake
	// one. Default (nil): the real clock.
	Clock clock.WithTicker
}

// NewOptions returns Options with kube-controller-manager's defaults.
func NewOptions() Options {
	return Options{ConcurrentDeploymentSyncs: defaultConcurrentDeploymentSyncs}
}

// AddFlags binds o to kube-controller-manager's flag, with its help text and
// o's current value as the default.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(
		&o.ConcurrentDeploymentSyncs,
		"concurrent-deployment-syncs",
		o.ConcurrentDeploymentSyncs,
		"The number of deployment objects that are allowed to sync concurrently. Larger number = more "+
			"responsive deployments, but more CPU (and network) load",
	)
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	if o.ConcurrentDeploymentSyncs < 1 {
		return fmt.Errorf(
			"--concurrent-deployment-syncs: must be at least 1, got %d",
			o.ConcurrentDeploymentSyncs,
		)
	}
	return nil
}
