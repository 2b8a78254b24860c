package csrcleaner

import (
	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
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
