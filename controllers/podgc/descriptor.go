package podgc

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the pod garbage collector's descriptor. Invalid options
// are reported by manager.Builder.Build.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		c, err := newController(cc, o.withDefaults())
		if err != nil {
			return nil, err
		}
		return c, nil
	}).
		WithAliases(Alias).
		WithValidator(o.Validate).
		WithInformers(corev1.SchemeGroupVersion.WithResource("pods"),
			corev1.SchemeGroupVersion.WithResource("nodes")).
		WithClientName(clientName).
		// What it reads of a pod besides its metadata: its node, and the
		// status it patches to Failed.
		WithReads(corev1.SchemeGroupVersion.WithResource("pods"),
			"spec.nodeName", "status.phase", "status.reason", "status.conditions")
}
