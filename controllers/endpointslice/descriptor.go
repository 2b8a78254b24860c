package endpointslice

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/servicepods"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. Invalid options are
// reported by manager.Builder.Build.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		c, err := newController(ctx, cc, o.withDefaults())
		if err != nil {
			return nil, err // the host names the controller
		}
		return c, nil
	}).
		WithAliases(Alias).
		WithEventSource(eventSource).
		WithValidator(o.Validate).
		WithInformers(
			corev1.SchemeGroupVersion.WithResource("pods"),
			corev1.SchemeGroupVersion.WithResource("services"),
			corev1.SchemeGroupVersion.WithResource("nodes"),
			discoveryv1.SchemeGroupVersion.WithResource("endpointslices"),
		).
		WithReads(corev1.SchemeGroupVersion.WithResource("pods"), servicepods.PodReads...)
}
