package nodelifecycle

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/internal/sharedflag"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "node-lifecycle-controller"
	Alias = "nodelifecycle"
)

// clientName is KCM's name for the controller's client and ServiceAccount;
// eventSource is the component its events name.
const (
	clientName  = "node-controller"
	eventSource = "node-controller"
)

// KCM's defaults for the controller's flags.
const (
	defaultNodeMonitorPeriod         = 5 * time.Second
	defaultNodeMonitorGracePeriod    = 50 * time.Second
	defaultNodeStartupGracePeriod    = time.Minute
	defaultNodeEvictionRate          = float32(0.1)
	defaultSecondaryNodeEvictionRate = float32(0.01)
	defaultLargeClusterSizeThreshold = int32(50)
	defaultUnhealthyZoneThreshold    = float32(0.55)
)

// FeatureNodeControllerLeaseCircuitBreaker: before a node whose Lease
// looks expired in the cache is marked Unknown, its live Lease is read;
// if it moved on, no node is judged until the cache has caught up (beta,
// on by default since 1.37).
const FeatureNodeControllerLeaseCircuitBreaker = featuregate.Feature(
	"NodeControllerLeaseCircuitBreaker")

// FeatureSpecs returns the gate above with its Kubernetes 1.37 default,
// for a program to add to its feature gate (so that --feature-gates can
// set it).
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeatureNodeControllerLeaseCircuitBreaker: {Default: true, PreRelease: featuregate.Beta},
	}
}

// Options configures the controller; start from NewOptions.
type Options struct {
	// NodeMonitorPeriod is --node-monitor-period: how often node health
	// is checked. Default: 5s. Must be positive.
	NodeMonitorPeriod time.Duration
	// NodeMonitorGracePeriod is --node-monitor-grace-period: how long a
	// node that posted a Ready condition may stay silent (no status, no
	// Lease renewal) before it is marked Unknown. Default: 50s.
	NodeMonitorGracePeriod time.Duration
	// NodeStartupGracePeriod is --node-startup-grace-period: the same for
	// a node that never posted a Ready condition. Default: 1m.
	NodeStartupGracePeriod time.Duration
	// NodeEvictionRate is --node-eviction-rate: nodes per second that get
	// a NoExecute taint in a healthy zone. Default: 0.1.
	NodeEvictionRate float32
	// SecondaryNodeEvictionRate is --secondary-node-eviction-rate: the
	// rate in an unhealthy zone larger than LargeClusterSizeThreshold
	// (smaller ones stop). Default: 0.01.
	SecondaryNodeEvictionRate float32
	// LargeClusterSizeThreshold is --large-cluster-size-threshold.
	// Default: 50.
	LargeClusterSizeThreshold int32
	// UnhealthyZoneThreshold is --unhealthy-zone-threshold: the share of
	// not-Ready nodes (at least three) that makes a zone unhealthy.
	// Default: 0.55.
	UnhealthyZoneThreshold float32

	// Clock times health checks, taints and the eviction queues; tests
	// inject a fake one. Default (nil): the real clock.
	Clock clock.WithTicker
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{
		NodeMonitorPeriod:         defaultNodeMonitorPeriod,
		NodeMonitorGracePeriod:    defaultNodeMonitorGracePeriod,
		NodeStartupGracePeriod:    defaultNodeStartupGracePeriod,
		NodeEvictionRate:          defaultNodeEvictionRate,
		SecondaryNodeEvictionRate: defaultSecondaryNodeEvictionRate,
		LargeClusterSizeThreshold: defaultLargeClusterSizeThreshold,
		UnhealthyZoneThreshold:    defaultUnhealthyZoneThreshold,
	}
}

// AddFlags binds KCM's flags for the controller to o, with KCM's names and
// help and o's current values as defaults.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.NodeStartupGracePeriod, "node-startup-grace-period",
		o.NodeStartupGracePeriod,
		"Amount of time which we allow starting Node to be unresponsive before "+
			"marking it unhealthy.")
	fs.DurationVar(&o.NodeMonitorGracePeriod, "node-monitor-grace-period",
		o.NodeMonitorGracePeriod,
		"Amount of time which we allow running Node to be unresponsive before "+
			"marking it unhealthy. Must be N times more than kubelet's "+
			"nodeStatusUpdateFrequency, where N means number of retries allowed for "+
			"kubelet to post node status. This value should also be greater than the "+
			"sum of HTTP2_PING_TIMEOUT_SECONDS and HTTP2_READ_IDLE_TIMEOUT_SECONDS")
	fs.Float32Var(&o.NodeEvictionRate, "node-eviction-rate", o.NodeEvictionRate,
		"Number of nodes per second on which pods are deleted in case of node failure "+
			"when a zone is healthy (see --unhealthy-zone-threshold for definition of "+
			"healthy/unhealthy). Zone refers to entire cluster in non-multizone clusters.")
	fs.Float32Var(&o.SecondaryNodeEvictionRate, "secondary-node-eviction-rate",
		o.SecondaryNodeEvictionRate,
		"Number of nodes per second on which pods are deleted in case of node failure "+
			"when a zone is unhealthy (see --unhealthy-zone-threshold for definition of "+
			"healthy/unhealthy). Zone refers to entire cluster in non-multizone clusters. "+
			"This value is implicitly overridden to 0 if the cluster size is smaller "+
			"than --large-cluster-size-threshold.")
	fs.Int32Var(&o.LargeClusterSizeThreshold, "large-cluster-size-threshold",
		o.LargeClusterSizeThreshold,
		fmt.Sprintf("Number of nodes from which %s treats the cluster as large for "+
			"the eviction logic purposes. --secondary-node-eviction-rate is implicitly "+
			"overridden to 0 for clusters this size or smaller. Notice: If nodes reside "+
			"in multiple zones, this threshold will be considered as zone node size "+
			"threshold for each zone to determine node eviction rate independently.",
			Name))
	fs.Float32Var(&o.UnhealthyZoneThreshold, "unhealthy-zone-threshold",
		o.UnhealthyZoneThreshold,
		"Fraction of Nodes in a zone which needs to be not Ready (minimum 3) for zone "+
			"to be treated as unhealthy. ")
	sharedflag.Duration(fs, &o.NodeMonitorPeriod, "node-monitor-period",
		"The period for syncing NodeStatus in NodeLifecycleController.")
}

// Validate reports every invalid field. KCM validates none of them; a
// zero or negative monitor period would make its loop spin, and negative
// grace periods or rates mean nothing, so they are rejected here.
func (o Options) Validate() error {
	var errs []error
	if o.NodeMonitorPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--node-monitor-period: must be positive, got %v",
			o.NodeMonitorPeriod))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--node-monitor-grace-period", o.NodeMonitorGracePeriod},
		{"--node-startup-grace-period", o.NodeStartupGracePeriod},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %v", d.flag, d.v))
		}
	}
	for _, r := range []struct {
		flag string
		v    float32
	}{
		{"--node-eviction-rate", o.NodeEvictionRate},
		{"--secondary-node-eviction-rate", o.SecondaryNodeEvictionRate},
		{"--unhealthy-zone-threshold", o.UnhealthyZoneThreshold},
	} {
		if r.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %v", r.flag, r.v))
		}
	}
	if o.LargeClusterSizeThreshold < 0 {
		errs = append(errs, fmt.Errorf("--large-cluster-size-threshold: must not be "+
			"negative, got %d", o.LargeClusterSizeThreshold))
	}
	return errors.Join(errs...)
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// podReads are the fields of a pod the controller reads besides its
// metadata: the node it is bound to, and its Ready condition (which it
// patches to False, with the cached resourceVersion as a precondition).
var podReads = []string{"spec.nodeName", "status.conditions"}
