package endpointslicemirroring

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. Invalid options are
// reported by manager.Builder.Build.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		if err := o.Validate(); err != nil {
			return nil, err
		}
		return newController(cc, o)
	}).WithAliases(Alias).WithEventSource(eventSource).WithValidator(o.Validate).
		WithInformers(
			corev1.SchemeGroupVersion.WithResource("endpoints"),
			discoveryv1.SchemeGroupVersion.WithResource("endpointslices"),
			corev1.SchemeGroupVersion.WithResource("services"),
		).
		// Of a Service, only whether it has a selector is read.
		WithReads(corev1.SchemeGroupVersion.WithResource("services"), "spec.selector").
		WithClientName(clientName)
}
