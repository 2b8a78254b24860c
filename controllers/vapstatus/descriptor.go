package vapstatus

import (
	"context"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. Invalid options are
// reported by manager.Builder.Build.
func Descriptor(o Options) descriptor.Descriptor {
	o = o.withDefaults()
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		return newController(cc, int(o.ConcurrentPolicySyncs))
	}).WithValidator(o.Validate).WithInformers(policies)
}
