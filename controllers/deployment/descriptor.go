package deployment

import (
	"context"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "deployment-controller"
	Alias = "deployment"
)

// FeatureTerminatingReplicas: report status.terminatingReplicas on
// Deployments (beta, on by default since 1.35). It is read through
// descriptor.Context.FeatureGate when the host registers it; otherwise its
// Kubernetes 1.37 default applies.
const FeatureTerminatingReplicas featuregate.Feature = "DeploymentReplicaSetTerminatingReplicas"

// FeatureSpecs returns the gates the controller consults with their
// Kubernetes 1.37 defaults, for a program to add to its feature gate (so
// that --feature-gates can set them).
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeatureTerminatingReplicas: {Default: true, PreRelease: featuregate.Beta},
	}
}

// Descriptor returns the Deployment controller (deployment-controller,
// alias deployment) with o.ConcurrentDeploymentSyncs workers. Invalid
// options are reported by manager.Builder.Build. It is sharded by namespace
// (a Deployment, its ReplicaSets and their pods share one): under
// --enable-sharding every replica works its slots, each slot with that many
// workers.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		client, err := cc.ClientBuilder.Client(cc.Name)
		if err != nil {
			return nil, err
		}
		c, err := newController(config{
			name:                cc.Name,
			metrics:             cc.Metrics,
			client:              client,
			deployments:         cc.InformerFactory.Apps().V1().Deployments(),
			replicaSets:         cc.InformerFactory.Apps().V1().ReplicaSets(),
			pods:                cc.InformerFactory.Core().V1().Pods(),
			recorder:            cc.EventRecorder,
			workers:             int(o.ConcurrentDeploymentSyncs),
			clock:               o.Clock,
			terminatingReplicas: gate.Enabled(cc.FeatureGate, FeatureTerminatingReplicas, true),
			log:                 logr.FromContextOrDiscard(ctx),
		})
		if err != nil {
			return nil, err // the host names the controller
		}
		return c, nil
	}).
		WithAliases(Alias).
		WithValidator(o.Validate).
		WithInformers(appsv1.SchemeGroupVersion.WithResource("deployments"),
			appsv1.SchemeGroupVersion.WithResource("replicasets")).
		WithIndexers(corev1.SchemeGroupVersion.WithResource("pods"), index.PodsByControllerIndexers()).
		WithReads(corev1.SchemeGroupVersion.WithResource("pods"), podReads...).
		Sharded(shard.ByNamespace)
}

// podReads are the fields of a pod the controller reads besides its
// metadata (the pod index and the delete handler read only its controller
// reference): its phase, as a Recreate rollout waits until no pod of an old
// ReplicaSet is left that has not terminated (oldPodsRunning).
var podReads = []string{
	"status.phase",
}
