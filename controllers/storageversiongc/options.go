package storageversiongc

import (
	"github.com/spf13/pflag"
	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/component-base/featuregate"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "storageversion-garbage-collector-controller"
	Alias = "storage-version-gc"
)

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "storage-version-garbage-collector"

// The gates KCM starts the controller under, both required:
// APIServerIdentity (beta, on) and StorageVersionAPI (alpha, off) in
// Kubernetes 1.37. By default the controller therefore does not start.
const (
	FeatureAPIServerIdentity featuregate.Feature = "APIServerIdentity"
	FeatureStorageVersionAPI featuregate.Feature = "StorageVersionAPI"
)

// FeatureSpecs returns the gates above with their Kubernetes 1.37
// defaults, for a program to add to its feature gate (so that
// --feature-gates can turn the controller on).
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeatureAPIServerIdentity: {Default: true, PreRelease: featuregate.Beta},
		FeatureStorageVersionAPI: {Default: false, PreRelease: featuregate.Alpha},
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
	leases          = coordinationv1.SchemeGroupVersion.WithResource("leases")
	storageVersions = apiserverinternalv1alpha1.SchemeGroupVersion.WithResource("storageversions")
)
