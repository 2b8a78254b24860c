package nodeipam

import (
	"context"

	"github.com/go-logr/logr"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. With AllocateNodeCIDRs
// false its InitFunc starts nothing (the host reports it not started), as
// KCM skips the controller. Invalid options are reported by
// manager.Builder.Build.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		if !o.AllocateNodeCIDRs {
			logr.FromContextOrDiscard(ctx).Info(
				"Not starting: --allocate-node-cidrs is false")
			return nil, nil
		}
		s, err := o.settings()
		if err != nil {
			return nil, err
		}
		return newController(ctx, cc, s)
	}).WithAliases(Alias).WithEventSource(eventSource).WithValidator(o.Validate).
		WithInformers(nodes).
		// Its writes are patches: of a node it reads its CIDRs (and
		// metadata: name, UID, deletion).
		WithReads(nodes, "spec.podCIDR", "spec.podCIDRs").
		WithClientName(clientName)
}
