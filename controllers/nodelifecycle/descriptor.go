package nodelifecycle

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller (node-lifecycle-controller, alias
// nodelifecycle) with o's settings. Invalid options are reported by
// manager.Builder.Build. Not sharded: zone states and eviction rates are
// computed over every node of the cluster.
func Descriptor(o Options) descriptor.Descriptor {
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		return newFromContext(ctx, cc, o.withDefaults())
	}).WithAliases(Alias).
		WithValidator(o.Validate).
		WithEventSource(eventSource).
		WithInformers(corev1.SchemeGroupVersion.WithResource("nodes"),
			coordinationv1.SchemeGroupVersion.WithResource("leases"), pods).
		WithIndexers(pods, index.PodsByNodeIndexers()).
		WithReads(pods, podReads...).
		WithClientName(clientName)
}
