package serviceaccounttoken

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. It is a StartFirst
// descriptor, as KCM starts this controller before all others. Invalid
// options are reported by manager.Builder.Build; without
// --service-account-private-key-file the InitFunc returns (nil, nil).
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		o := o.withDefaults()
		if o.ServiceAccountKeyFile == "" {
			logr.FromContextOrDiscard(ctx).
				Info("Controller is disabled because there is no private key", "controller", cc.Name)
			return nil, nil
		}
		s, err := readKey(o.ServiceAccountKeyFile)
		if err != nil {
			return nil, err
		}
		builder := cc.RootClientBuilder
		if builder == nil {
			builder = cc.ClientBuilder
		}
		ca, err := o.rootCA(builder)
		if err != nil {
			return nil, err
		}
		client, err := builder.Client(clientName)
		if err != nil {
			return nil, fmt.Errorf("client for %q: %w", clientName, err)
		}
		return newController(cc, client, s, ca, o)
	}).
		WithAliases(Alias).
		WithValidator(o.Validate).
		StartFirst().
		WithInformers(corev1.SchemeGroupVersion.WithResource("serviceaccounts"),
			corev1.SchemeGroupVersion.WithResource("secrets")).
		WithClientName(clientName)
}
