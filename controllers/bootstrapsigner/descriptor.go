package bootstrapsigner

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the signer's descriptor, disabled by default as in
// KCM. Invalid options are reported by manager.Builder.Build.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		return newController(cc, o.withDefaults())
	}).WithAliases(Alias).DisabledByDefault().WithValidator(o.Validate).
		WithInformers(corev1.SchemeGroupVersion.WithResource("secrets"),
			corev1.SchemeGroupVersion.WithResource("configmaps")).
		WithClientName(clientName)
}
