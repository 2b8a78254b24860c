package podgroupprotection

import (
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/component-base/featuregate"
)

// Name is the controller's name in --controllers, as in KCM, which gives
// it no alias.
const Name = "podgroup-protection-controller"

// Finalizer keeps a PodGroup that pods still name from going. The API
// server's PodGroupProtection admission plugin puts it on every PodGroup
// created while GenericWorkload is on; the controller only takes it off.
const Finalizer = "scheduling.k8s.io/podgroup-protection"

// clientName is KCM's name for the controller's client and ServiceAccount:
// the controller's own name.
const clientName = Name

// FeatureGenericWorkload is the gate KCM starts the controller under:
// beta and off by default in Kubernetes 1.37, so by default the
// controller does not start.
const FeatureGenericWorkload featuregate.Feature = "GenericWorkload"

// FeatureSpecs returns the gate above with its Kubernetes 1.37 default,
// for a program to add to its feature gate (so that --feature-gates can
// turn the controller on).
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeatureGenericWorkload: {Default: false, PreRelease: featuregate.Beta},
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
	podGroups = schedulingv1beta1.SchemeGroupVersion.WithResource("podgroups")
	pods      = corev1.SchemeGroupVersion.WithResource("pods")
)

// podReads are the fields of a pod the controller reads besides its
// metadata: the PodGroup it names, and whether it has terminated.
var podReads = []string{"spec.schedulingGroup", "status.phase"}
