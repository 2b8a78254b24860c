package pvcprotection

import (
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "persistentvolumeclaim-protection-controller"
	Alias = "pvc-protection"
)

// Finalizer keeps a claim in use from going.
const Finalizer = "kubernetes.io/pvc-protection"

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "pvc-protection-controller"

// FeaturePersistentVolumeClaimUnusedSinceTime: keep the Unused condition
// of every bound claim that is not being deleted, True while no pod uses
// it, False while one does (beta, on by default since 1.37). It is
// consulted through descriptor.Context.FeatureGate when the host registers
// it; otherwise its Kubernetes 1.37 default applies.
const FeaturePersistentVolumeClaimUnusedSinceTime = featuregate.Feature(
	"PersistentVolumeClaimUnusedSinceTime")

// FeatureSpecs returns the gate above with its Kubernetes 1.37 default,
// for a program to add to its feature gate (so that --feature-gates can
// set it).
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeaturePersistentVolumeClaimUnusedSinceTime: {Default: true, PreRelease: featuregate.Beta},
	}
}

// Options configures the controller. KCM has no option for it: the zero
// value is KCM's behaviour.
type Options struct{}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{} }

// AddFlags registers nothing: KCM has no flag for this controller. It
// exists so that every built-in controller package has the same shape.
func (o *Options) AddFlags(*pflag.FlagSet) {}

var (
	pvcs = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	pods = corev1.SchemeGroupVersion.WithResource("pods")
)

// podReads are the fields of a pod the controller reads besides its
// metadata (deletion timestamp and grace period included): the claims it
// names (the shared index's fields), where it runs, and whether it has
// terminated.
var podReads = append([]string{
	"spec.nodeName",
	"status.phase",
	"status.initContainerStatuses.state",
	"status.containerStatuses.state",
	"status.ephemeralContainerStatuses.state",
}, index.PodsByClaimReads...)
