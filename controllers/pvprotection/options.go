package pvprotection

import (
	"context"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
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

// Descriptor returns the controller's descriptor.
func Descriptor(Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		return newController(cc)
	}).WithAliases(Alias).
		WithInformers(corev1.SchemeGroupVersion.WithResource("persistentvolumes")).
		WithClientName(clientName)
}
