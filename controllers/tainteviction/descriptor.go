package tainteviction

import (
	"context"

	"github.com/go-logr/logr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the controller's descriptor. It is not sharded: see
// the package documentation.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		if !gate.Enabled(cc.FeatureGate, FeatureSeparateTaintEvictionController, true) {
			logr.FromContextOrDiscard(ctx).Info("Not starting: its feature gate is off",
				"featureGate", FeatureSeparateTaintEvictionController)
			return nil, nil
		}
		return newController(cc, o)
	}).
		WithInformers(pods, nodes).
		WithIndexers(pods, index.PodsByNodeIndexers()).
		WithClientName(clientName).
		// Of a pod it reads where it runs and what it tolerates; the
		// deletion reads the pod afresh from the API server. Of a node,
		// its taints.
		WithReads(pods, "spec.nodeName", "spec.tolerations").
		WithReads(nodes, "spec.taints")
}
