package pvcprotection

import (
	"context"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Descriptor returns the controller's descriptor. It is sharded by
// namespace (a claim and the pods that use it share one): under
// --enable-sharding every replica works the claims of its slots.
func Descriptor(Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		return newController(cc)
	}).WithAliases(Alias).
		WithInformers(pvcs).
		WithIndexers(pods, index.PodsByClaimIndexers()).
		WithReads(pods, podReads...).
		Sharded(shard.ByNamespace).
		WithClientName(clientName)
}
