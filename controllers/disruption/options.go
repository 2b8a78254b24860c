package disruption

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "disruption-controller"
	Alias = "disruption"
)

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "disruption-controller"

// EventSource is the source component of the controller's events: KCM's
// disruption controller records them as "controllermanager".
const EventSource = "controllermanager"

// DeletionTimeout is how long a pod stays in a budget's disruptedPods
// after an eviction admitted it, waiting for its deletion to be seen:
// KCM's two minutes. Past it the entry is dropped and the pod counts again.
const DeletionTimeout = 2 * time.Minute

// stalePodDisruptionTimeout is how long a pod may carry a True
// DisruptionTarget condition without being deleted before the condition
// is reset to False: KCM's two minutes.
const stalePodDisruptionTimeout = 2 * time.Minute

// defaultConcurrentDisruptionSyncs is KCM's --concurrent-disruption-syncs.
const defaultConcurrentDisruptionSyncs = 1

// Options configures the controller. Start from NewOptions: a zero field
// is invalid, not defaulted, so that "--concurrent-disruption-syncs=0" is
// reported rather than ignored.
type Options struct {
	// ConcurrentDisruptionSyncs is how many PodDisruptionBudgets are
	// synced at once (--concurrent-disruption-syncs). Default: 1. Must be
	// at least 1.
	ConcurrentDisruptionSyncs int32
}

// NewOptions returns KCM's defaults.
func NewOptions() Options {
	return Options{ConcurrentDisruptionSyncs: defaultConcurrentDisruptionSyncs}
}

// AddFlags binds o to KCM's flag.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentDisruptionSyncs, "concurrent-disruption-syncs",
		o.ConcurrentDisruptionSyncs, "The number of PDB objects that are allowed to sync "+
			"concurrently. Larger number = more responsive PDB updates, but more CPU "+
			"(and network) load")
}

// Validate reports an option out of range, naming its flag.
func (o Options) Validate() error {
	if o.ConcurrentDisruptionSyncs < 1 {
		return fmt.Errorf("--concurrent-disruption-syncs (Options.ConcurrentDisruptionSyncs): "+
			"must be at least 1, got %d; leave it unset for KCM's default of %d",
			o.ConcurrentDisruptionSyncs, defaultConcurrentDisruptionSyncs)
	}
	return nil
}

var (
	podsResource   = corev1.SchemeGroupVersion.WithResource("pods")
	pdbsResource   = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
	rcsResource    = corev1.SchemeGroupVersion.WithResource("replicationcontrollers")
	rsResource     = appsv1.SchemeGroupVersion.WithResource("replicasets")
	deployResource = appsv1.SchemeGroupVersion.WithResource("deployments")
	stsResource    = appsv1.SchemeGroupVersion.WithResource("statefulsets")
)
