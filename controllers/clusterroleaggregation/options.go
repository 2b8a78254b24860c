package clusterroleaggregation

import (
	"context"

	"github.com/spf13/pflag"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "clusterrole-aggregation-controller"
	Alias = "clusterrole-aggregation"
)

// FieldManager is the field manager of the controller's applies, KCM's.
const FieldManager = "clusterrole-aggregation-controller"

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

// Descriptor returns the controller's descriptor.
func Descriptor(Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		return newController(cc)
	}).WithAliases(Alias).
		WithInformers(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
}
