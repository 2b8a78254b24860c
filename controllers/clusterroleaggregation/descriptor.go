package clusterroleaggregation

import (
	"context"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor.
func Descriptor(Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		return newController(cc)
	}).WithAliases(Alias).
		WithInformers(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
}
