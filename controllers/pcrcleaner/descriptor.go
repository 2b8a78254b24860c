package pcrcleaner

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. The controller does not
// start when FeaturePodCertificateRequest is off.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		if !gate.Enabled(cc.FeatureGate, FeaturePodCertificateRequest, true) {
			logr.FromContextOrDiscard(ctx).Info("Not starting: feature gate is disabled",
				"featureGate", FeaturePodCertificateRequest)
			return nil, nil
		}
		clk := o.Clock
		if clk == nil {
			clk = clock.RealClock{}
		}
		return newController(cc, clk)
	}).WithInformers(requests).
		WithClientName(clientName)
}
