package ttlafterfinished

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. Invalid options are
// reported by manager.Builder.Build.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		c, err := newController(cc, o.withDefaults())
		if err != nil {
			return nil, err
		}
		return c, nil
	}).
		WithAliases(Alias).
		WithValidator(o.Validate).
		WithInformers(batchv1.SchemeGroupVersion.WithResource("jobs"))
}
