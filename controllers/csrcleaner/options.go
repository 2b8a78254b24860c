package csrcleaner

import (
	"context"

	"github.com/spf13/pflag"
	certv1 "k8s.io/api/certificates/v1"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "certificatesigningrequest-cleaner-controller"
	Alias = "csrcleaner"
)

// clientName is KCM's name for the client (and ServiceAccount) of its
// three certificate controllers.
const clientName = "certificate-controller"

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
