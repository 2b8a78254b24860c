package csrcleaner

import (
	"context"

	certv1 "k8s.io/api/certificates/v1"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		clk := o.Clock
		if clk == nil {
			clk = clock.RealClock{}
		}
		return newController(cc, clk)
	}).WithAliases(Alias).
		WithInformers(certv1.SchemeGroupVersion.WithResource("certificatesigningrequests")).
		WithClientName(clientName)
}
