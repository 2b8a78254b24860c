package cloud

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/internal/sharedflag"
)

// Options configure the cloud controllers, under cloud-controller-manager
// v1.37's flag names and defaults. --cloud-provider and --cloud-config are
// the host's (manager.Options); --use-service-account-credentials too.
type Options struct {
	// ClusterName (--cluster-name) prefixes the cloud resources the
	// service and route controllers create. Default: "kubernetes".
	ClusterName string
	// ClusterCIDR (--cluster-cidr) is the pod CIDR, or two of them
	// (comma-separated, one per IP family), whose routes node-route-controller
	// configures. Required when it runs.
	ClusterCIDR string
	// AllocateNodeCIDRs (--allocate-node-cidrs) is accepted for command-line
	// compatibility; in v1.37 no cloud controller reads it. Default: false.
	AllocateNodeCIDRs bool
	// ConfigureCloudRoutes (--configure-cloud-routes): whether
	// node-route-controller runs at all. Default: true.
	ConfigureCloudRoutes bool
	// RouteReconciliationPeriod (--route-reconciliation-period). Default: 10s.
	RouteReconciliationPeriod time.Duration
	// NodeMonitorPeriod (--node-monitor-period) is how often
	// cloud-node-lifecycle-controller checks every node against the cloud.
	// Default: 5s.
	NodeMonitorPeriod time.Duration
	// NodeStatusUpdateFrequency (--node-status-update-frequency) is how
	// often cloud-node-controller refreshes node addresses. Default: 5m.
	NodeStatusUpdateFrequency time.Duration
	// ConcurrentNodeSyncs (--concurrent-node-syncs): cloud-node-controller
	// workers. Default: 1.
	ConcurrentNodeSyncs int32
	// ConcurrentNodeStatusUpdates (--concurrent-node-status-updates):
	// workers updating node status; 0 uses ConcurrentNodeSyncs. Default: 0.
	ConcurrentNodeStatusUpdates int32
	// ConcurrentNodeLifecycleSyncs (--concurrent-node-lifecycle-syncs).
	// Default: 1.
	ConcurrentNodeLifecycleSyncs int32
	// ConcurrentServiceSyncs (--concurrent-service-syncs): service-lb-controller
	// workers. Default: 1.
	ConcurrentServiceSyncs int32
	// AllowUntaggedCloud (--allow-untagged-cloud, deprecated upstream)
	// lets NewProvider accept a provider without a cluster ID. Default: false.
	AllowUntaggedCloud bool
}

// NewOptions returns the defaults.
func NewOptions() Options {
	return Options{
		ClusterName:                  "kubernetes",
		ConfigureCloudRoutes:         true,
		RouteReconciliationPeriod:    10 * time.Second,
		NodeMonitorPeriod:            5 * time.Second,
		NodeStatusUpdateFrequency:    5 * time.Minute,
		ConcurrentNodeSyncs:          1,
		ConcurrentNodeLifecycleSyncs: 1,
		ConcurrentServiceSyncs:       1,
	}
}

// AddFlags binds o to fs under upstream's names, with o's values as the
// defaults shown.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	sharedflag.String(fs, &o.ClusterName, "cluster-name", "The instance prefix for the cluster.")
	sharedflag.String(fs, &o.ClusterCIDR, "cluster-cidr", "CIDR Range for Pods in cluster.")
	sharedflag.Bool(fs, &o.AllocateNodeCIDRs, "allocate-node-cidrs",
		"Should CIDRs for Pods be allocated and set on the cloud provider. "+
			"Accepted for compatibility; no cloud controller reads it.")
	fs.BoolVar(&o.ConfigureCloudRoutes, "configure-cloud-routes", o.ConfigureCloudRoutes,
		"Should CIDRs allocated by allocate-node-cidrs be configured on the cloud provider.")
	fs.DurationVar(&o.RouteReconciliationPeriod, "route-reconciliation-period",
		o.RouteReconciliationPeriod,
		"The period for reconciling routes created for Nodes by cloud provider.")
	sharedflag.Duration(fs, &o.NodeMonitorPeriod, "node-monitor-period",
		"The period for syncing NodeStatus in CloudNodeLifecycleController.")
	fs.DurationVar(&o.NodeStatusUpdateFrequency, "node-status-update-frequency",
		o.NodeStatusUpdateFrequency, "Specifies how often the controller updates nodes' status.")
	fs.Int32Var(&o.ConcurrentNodeSyncs, "concurrent-node-syncs", o.ConcurrentNodeSyncs,
		"Number of workers concurrently synchronizing nodes.")
	fs.Int32Var(&o.ConcurrentNodeStatusUpdates, "concurrent-node-status-updates",
		o.ConcurrentNodeStatusUpdates, "Number of workers concurrently updating node statuses. If "+
			"unspecified or 0, --concurrent-node-syncs is used instead")
	fs.Int32Var(&o.ConcurrentNodeLifecycleSyncs, "concurrent-node-lifecycle-syncs",
		o.ConcurrentNodeLifecycleSyncs,
		"The number of workers for syncing NodeStatus in cloud-node-lifecycle-controller.")
	fs.Int32Var(&o.ConcurrentServiceSyncs, "concurrent-service-syncs", o.ConcurrentServiceSyncs,
		"The number of services that are allowed to sync concurrently. Larger number = more responsive "+
			"service management, but more CPU (and network) load")
	fs.BoolVar(&o.AllowUntaggedCloud, "allow-untagged-cloud", o.AllowUntaggedCloud,
		"Allow the cluster to run without the cluster-id on cloud instances.")
	_ = fs.MarkDeprecated("allow-untagged-cloud", "This flag is deprecated and will be removed in a "+
		"future release. A cluster-id will be required on cloud instances.")
}

// Validate reports every invalid setting at once, naming its flag:
// upstream's checks of the worker counts, and, stricter than upstream,
// periods that are not positive (upstream would spin) and a service worker
// count below one (upstream would never reconcile a load balancer).
func (o Options) Validate() []error {
	var errs []error
	positive := func(flag string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s: must be a positive duration, got %v", flag, d))
		}
	}
	positive("route-reconciliation-period", o.RouteReconciliationPeriod)
	positive("node-monitor-period", o.NodeMonitorPeriod)
	positive("node-status-update-frequency", o.NodeStatusUpdateFrequency)
	atLeast := func(flag string, v, min int32) {
		if v < min {
			errs = append(errs, fmt.Errorf("--%s: must be at least %d, got %d", flag, min, v))
		}
	}
	atLeast("concurrent-node-syncs", o.ConcurrentNodeSyncs, 1)
	atLeast("concurrent-node-status-updates", o.ConcurrentNodeStatusUpdates, 0)
	atLeast("concurrent-node-lifecycle-syncs", o.ConcurrentNodeLifecycleSyncs, 1)
	atLeast("concurrent-service-syncs", o.ConcurrentServiceSyncs, 1)
	return errs
}
