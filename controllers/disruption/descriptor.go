package disruption

import (
	"context"

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
		return newFromContext(ctx, cc, int(o.ConcurrentDisruptionSyncs))
	}).WithAliases(Alias).WithEventSource(EventSource).WithValidator(o.Validate).
		WithInformers(podsResource, pdbsResource, rcsResource, rsResource,
			deployResource, stsResource).
		// Of a pod, besides its metadata (labels, owners, deletion, generation):
		// its conditions (Ready, DisruptionTarget) and whether it is terminal.
		WithReads(podsResource, "status.conditions", "status.phase").
		// Of the pods' controllers, their size.
		WithReads(rcsResource, "spec.replicas").
		WithReads(rsResource, "spec.replicas").
		WithReads(deployResource, "spec.replicas").
		WithReads(stsResource, "spec.replicas")
}
