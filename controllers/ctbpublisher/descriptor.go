package ctbpublisher

import (
	"context"
	"slices"

	"github.com/go-logr/logr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the publisher's descriptor. Invalid options are
// reported by manager.Builder.Build. The controller does not start when
// FeatureClusterTrustBundle is off, when no CA is configured, or when the
// API server does not serve certificates.k8s.io/v1 ClusterTrustBundles.
func Descriptor(o Options) descriptor.Descriptor {
	o.RootCA = slices.Clone(o.RootCA) // later changes by the caller do not reach it
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		log := logr.FromContextOrDiscard(ctx)
		if !gate.Enabled(cc.FeatureGate, FeatureClusterTrustBundle, true) {
			log.Info("Not starting: feature gate is disabled",
				"featureGate", FeatureClusterTrustBundle)
			return nil, nil
		}
		ca, source, err := o.rootCA(cc)
		if err != nil {
			return nil, err
		}
		if len(ca) == 0 {
			log.Info("Not starting: no CA configured " +
				"(Options.RootCA, --root-ca-file or the client configuration's CA)")
			return nil, nil
		}
		c, err := newController(ctx, cc, ca)
		if c == nil || err != nil {
			return nil, err
		}
		log.V(1).Info("Publishing the kube-apiserver serving CA", "source", source)
		return c, nil
	}).WithValidator(o.Validate).WithInformers(bundles).
		WithClientName(clientName)
}
