package servicecidr

import (
	"github.com/spf13/pflag"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/component-base/featuregate"
)

// Name is the controller's name in --controllers, as in KCM (which gives
// it no alias).
const Name = "service-cidr-controller"

// Finalizer keeps a ServiceCIDR whose addresses are still allocated from
// going.
const Finalizer = "networking.k8s.io/service-cidr-finalizer"

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "service-cidrs-controller"

// FeatureMultiCIDRServiceAllocator is the gate KCM starts the controller
// under: GA and locked on in Kubernetes 1.37. With it off the controller
// does not start.
const FeatureMultiCIDRServiceAllocator featuregate.Feature = "MultiCIDRServiceAllocator"

// FeatureSpecs returns the gate above with its Kubernetes 1.37 default,
// for a program to add to its feature gate.
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeatureMultiCIDRServiceAllocator: {Default: true, PreRelease: featuregate.GA,
			LockToDefault: true},
	}
}

// Options configures the controller. KCM has no option for it (its five
// workers are fixed): the zero value is KCM's behaviour.
type Options struct{}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{} }

// AddFlags registers nothing: KCM has no flag for this controller. It
// exists so that every built-in controller package has the same shape.
func (o *Options) AddFlags(*pflag.FlagSet) {}

var (
	serviceCIDRs = networkingv1.SchemeGroupVersion.WithResource("servicecidrs")
	ipAddresses  = networkingv1.SchemeGroupVersion.WithResource("ipaddresses")
)
