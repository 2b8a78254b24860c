package namespace

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the namespace controller (namespace-controller, alias
// namespace). Invalid options are reported by manager.Builder.Build.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		c, err := newController(ctx, cc, o.withDefaults())
		if err != nil {
			return nil, err
		}
		return c, nil
	}).
		WithAliases(Alias).
		WithValidator(o.Validate).
		WithInformers(corev1.SchemeGroupVersion.WithResource("namespaces"))
}
