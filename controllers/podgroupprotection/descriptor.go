package podgroupprotection

import (
	"context"

	"github.com/go-logr/logr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. It starts only with
// GenericWorkload on (read through the host's gate), and runs only while
// the API server serves scheduling.k8s.io/v1beta1 PodGroups (a beta API,
// off unless the API server enables it). PodGroups are cached whole: the
// controller writes back the cached object.
func Descriptor(Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		if !gate.Enabled(cc.FeatureGate, FeatureGenericWorkload,
			FeatureSpecs()[FeatureGenericWorkload].Default) {
			logr.FromContextOrDiscard(ctx).Info("Not starting: a feature gate it needs is off",
				"featureGate", FeatureGenericWorkload)
			return nil, nil
		}
		return newController(cc)
	}).WithInformers(podGroups).
		WithIndexers(pods, indexers()).
		WithReads(pods, podReads...).
		WhenServed(podGroups)
}
