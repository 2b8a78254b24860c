package vacprotection

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. It is not sharded: see
// the package documentation.
func Descriptor(Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		if !gate.Enabled(cc.FeatureGate, FeatureVolumeAttributesClass, true) {
			logr.FromContextOrDiscard(ctx).Info("Not starting: its feature gate is off",
				"featureGate", FeatureVolumeAttributesClass)
			return nil, nil
		}
		return newController(cc)
	}).WithInformers(vacs).
		WithIndexers(pvs, cache.Indexers{pvsByClass: pvClassNames}).
		WithIndexers(pvcs, cache.Indexers{pvcsByClass: pvcClassNames})
}
