package ephemeral

import (
	"context"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Descriptor returns the controller with o.ConcurrentEphemeralVolumeSyncs
// workers. Invalid options are reported by manager.Builder.Build. It is
// sharded by namespace (a pod and its claims share one): under
// --enable-sharding every replica works the pods of its slots.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		return newController(cc, int(o.ConcurrentEphemeralVolumeSyncs))
	}).WithAliases(Alias).
		WithValidator(o.Validate).
		WithEventSource(eventSource).
		WithInformers(pvcs).
		WithIndexers(pods, index.PodsByClaimIndexers()).
		// What the index reads is all it reads of a pod besides its
		// metadata: the volumes' names and their ephemeral sources.
		WithReads(pods, index.PodsByClaimReads...).
		Sharded(shard.ByNamespace)
}
