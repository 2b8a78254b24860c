package pvprotection

import (
	"github.com/spf13/pflag"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "persistentvolume-protection-controller"
	Alias = "pv-protection"
)

// Finalizer keeps a volume in use from going.
const Finalizer = "kubernetes.io/pv-protection"

// clientName is KCM's name for the controller's client and ServiceAccount.
const clientName = "pv-protection-controller"

// Options configures the controller. KCM has no option for it: the zero
// value is KCM's behaviour.
type Options struct{}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{} }

// AddFlags registers nothing: KCM has no flag for this controller. It
// exists so that every built-in controller package has the same shape.
func (o *Options) AddFlags(*pflag.FlagSet) {}
