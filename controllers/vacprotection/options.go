package vacprotection

import (
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/component-base/featuregate"
)

// Name is the controller's name in --controllers, as in KCM (which gives
// it no alias).
const Name = "volumeattributesclass-protection-controller"

// Finalizer keeps a VolumeAttributesClass in use from going.
const Finalizer = "kubernetes.io/vac-protection"

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "volumeattributesclass-protection-controller"

// FeatureVolumeAttributesClass is the gate KCM starts the controller
// under: GA and locked on in Kubernetes 1.37. With it off the controller
// does not start.
const FeatureVolumeAttributesClass featuregate.Feature = "VolumeAttributesClass"

// FeatureSpecs returns the gate above with its Kubernetes 1.37 default,
// for a program to add to its feature gate.
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeatureVolumeAttributesClass: {Default: true, PreRelease: featuregate.GA,
			LockToDefault: true},
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
	pvs  = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	pvcs = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	vacs = storagev1.SchemeGroupVersion.WithResource("volumeattributesclasses")
)
