package serviceaccount

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Descriptor returns the service account controller's descriptor. Invalid
// options are reported by manager.Builder.Build. It is sharded by
// namespace: under --enable-sharding a replica caches the Namespaces and
// ServiceAccounts of its slots only.
func Descriptor(o Options) descriptor.Descriptor {
	o.ServiceAccounts = slices.Clone(
		o.ServiceAccounts,
	) // later changes by the caller do not reach it
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
		WithInformers(corev1.SchemeGroupVersion.WithResource("namespaces"),
			corev1.SchemeGroupVersion.WithResource("serviceaccounts")).
		Sharded(shard.ByNamespace).
		WithClientName(clientName)
}
