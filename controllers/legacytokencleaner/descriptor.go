package legacytokencleaner

import (
	"context"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Descriptor returns the cleaner's descriptor, enabled by default as in
// KCM. Invalid options are reported by manager.Builder.Build. It is sharded
// by namespace: a token, its ServiceAccount and the pods that mount it are
// in one namespace.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		return newController(cc, o.withDefaults())
	}).WithAliases(Alias).WithValidator(o.Validate).
		WithInformers(serviceAccounts, secrets, pods).
		WithReads(secrets, "type").
		WithReads(serviceAccounts, "secrets").
		WithReads(pods, podReads...).
		Sharded(shard.ByNamespace).
		WithClientName(clientName)
}
