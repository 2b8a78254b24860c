package clusterroleaggregation

import (
	"github.com/spf13/pflag"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "clusterrole-aggregation-controller"
	Alias = "clusterrole-aggregation"
)

// fieldManager is the field manager of the controller's applies, KCM's.
const fieldManager = "clusterrole-aggregation-controller"

// workers is KCM's: five.
const workers = 5

// Options configures the controller. KCM has no option for it: the zero
// value is KCM's behaviour.
type Options struct{}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{} }

// AddFlags registers nothing: KCM has no flag for this controller. It
// exists so that every built-in controller package has the same shape.
func (o *Options) AddFlags(*pflag.FlagSet) {}
