package garbagecollector

import (
	"context"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the garbage collector's descriptor. Invalid options
// are reported by manager.Builder.Build.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		if !o.EnableGarbageCollector {
			return nil, nil
		}
		d, err := depsFrom(cc, o)
		if err != nil {
			return nil, err
		}
		return newCollector(cc.Name, d), nil
	}).
		WithAliases(Alias).
		WithValidator(o.Validate).
		WithClientName(clientName).
		// It reads owner references and the rest of the metadata of
		// whatever it watches, through meta.Accessor, and nothing else.
		ReadsMetadataOnly()
}
