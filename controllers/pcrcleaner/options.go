package pcrcleaner

import (
	"github.com/spf13/pflag"
	certv1 "k8s.io/api/certificates/v1"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/clock"
)

// Name is the controller's name in --controllers, as in KCM (which gives
// it no alias).
const Name = "podcertificaterequest-cleaner-controller"

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "podcertificaterequestcleaner"

// FeaturePodCertificateRequest is KCM's gate of the controller (GA, on by
// default, in Kubernetes 1.37): when it is off the controller does not
// start. It is consulted through descriptor.Context.FeatureGate when the
// host registers it; otherwise its Kubernetes 1.37 default applies.
const FeaturePodCertificateRequest = featuregate.Feature("PodCertificateRequest")

// FeatureSpecs returns the gate above with its Kubernetes 1.37 default,
// for a program to add to its feature gate (so that --feature-gates can
// set it).
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeaturePodCertificateRequest: {Default: true, PreRelease: featuregate.GA},
	}
}

// Options configures the controller. KCM has no option for it: the zero
// value is KCM's behaviour.
type Options struct {
	// Clock times the passes and tells the requests' ages; tests inject a
	// fake one. Not a flag. Default (nil): the real clock.
	Clock clock.WithTicker
}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{} }

// AddFlags registers nothing: KCM has no flag for this controller. It
// exists so that every built-in controller package has the same shape.
func (o *Options) AddFlags(*pflag.FlagSet) {}

var requests = certv1.SchemeGroupVersion.WithResource("podcertificaterequests")
