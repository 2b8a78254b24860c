package rootcacertpublisher

import (
	"context"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Descriptor returns the publisher's descriptor. Invalid options are
// reported by manager.Builder.Build. It is sharded by namespace: under
// --enable-sharding a replica caches the Namespaces and ConfigMaps of its
// slots only.
func Descriptor(o Options) descriptor.Descriptor {
	o.RootCA = slices.Clone(o.RootCA) // later changes by the caller do not reach it
	if o.Workers == 0 {
		o.Workers = 1
	}
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		ca, source, err := o.rootCA(cc)
		if err != nil {
			return nil, err
		}
		if len(ca) == 0 {
			logr.FromContextOrDiscard(ctx).
				Info("Not starting: no root CA configured (Options.RootCA, --root-ca-file or the " +
					"client configuration's CA)")
			return nil, nil
		}
		c, err := newController(cc, ca, o.Workers)
		if err != nil {
			return nil, err
		}
		logr.FromContextOrDiscard(ctx).V(1).Info("Publishing root CA", "source", source)
		return c, nil
	}).
		WithAliases(Alias).
		WithValidator(o.Validate).
		WithInformers(corev1.SchemeGroupVersion.WithResource("namespaces"),
			corev1.SchemeGroupVersion.WithResource("configmaps")).
		Sharded(shard.ByNamespace).
		WithClientName(clientName)
}
