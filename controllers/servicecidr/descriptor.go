package servicecidr

import (
	"context"

	"github.com/go-logr/logr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. It is not sharded: see
// the package documentation.
func Descriptor(Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		if !gate.Enabled(cc.FeatureGate, FeatureMultiCIDRServiceAllocator, true) {
			logr.FromContextOrDiscard(ctx).Info("Not starting: its feature gate is off",
				"featureGate", FeatureMultiCIDRServiceAllocator)
			return nil, nil
		}
		return newController(cc)
	}).WithInformers(serviceCIDRs, ipAddresses).
		WithClientName(clientName)
}
