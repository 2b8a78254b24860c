package hpa

import (
	"context"

	"github.com/go-logr/logr"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. Invalid options are
// reported by manager.Builder.Build. On a host built over ready-made
// clients (manager.Builder.WithClient, as in unit tests), which has no
// REST config for the metrics APIs and the scale subresource, the
// controller is not started, and says so in the log.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		cfg, err := cc.ClientBuilder.Config(clientName)
		if err != nil {
			logr.FromContextOrDiscard(ctx).Info("Not starting: the metrics APIs and the "+
				"scale subresource need a REST config", "controller", cc.Name, "reason", err)
			return nil, nil
		}
		return newFromContext(ctx, cc, o.withDefaults(), cfg)
	}).WithAliases(Alias).
		WithValidator(o.Validate).
		WithEventSource(eventSource).
		WithInformers(hpas, pods).
		WithReads(pods, podReads...).
		WithClientName(clientName)
}
