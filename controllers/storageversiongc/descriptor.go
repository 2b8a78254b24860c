package storageversiongc

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. The controller runs only
// while the API server serves StorageVersions (an alpha API, off unless
// the API server enables it), and then only with both gates on.
func Descriptor(Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		for _, g := range []featuregate.Feature{
			FeatureAPIServerIdentity, FeatureStorageVersionAPI} {
			if !gate.Enabled(cc.FeatureGate, g, FeatureSpecs()[g].Default) {
				logr.FromContextOrDiscard(ctx).Info("Not starting: a feature gate it needs is off",
					"featureGate", g)
				return nil, nil
			}
		}
		return newController(cc)
	}).WithAliases(Alias).
		WithInformers(leases, storageVersions).
		WhenServed(storageVersions).
		WithClientName(clientName)
}
