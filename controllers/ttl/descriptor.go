package ttl

import (
	"context"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. It reads nothing of a
// node but its metadata.
func Descriptor(Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		return newController(cc)
	}).WithAliases(Alias).
		WithInformers(nodes).
		WithReads(nodes)
}
