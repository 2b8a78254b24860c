package replicaset

import (
	"context"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Names, as kube-controller-manager has them.
const (
	ReplicaSetControllerName             = "replicaset-controller"
	replicaSetControllerAlias            = "replicaset"
	ReplicationControllerControllerName  = "replicationcontroller-controller"
	replicationControllerControllerAlias = "replicationcontroller"
)

// replicationControllerEventSource is the source component of the
// ReplicationController controller's events, KCM's (the ReplicaSet
// controller's is its name).
const replicationControllerEventSource = "replication-controller"

// replicationControllerClientName is KCM's name for the replication
// controller's client and ServiceAccount (the replica set controller's is
// its name).
const replicationControllerClientName = "replication-controller"

// Feature gates consulted through descriptor.Context.FeatureGate when the
// host registers them; otherwise their Kubernetes 1.37 defaults apply.
const (
	// featureTerminatingReplicas: report status.terminatingReplicas on
	// ReplicaSets (beta, on by default since 1.35).
	featureTerminatingReplicas featuregate.Feature = "DeploymentReplicaSetTerminatingReplicas"
	// featurePodDeletionCost: honour the pod-deletion-cost annotation when
	// scaling down (beta, on by default since 1.22).
	featurePodDeletionCost featuregate.Feature = "PodDeletionCost"
)

// FeatureSpecs returns the gates above with their Kubernetes 1.37
// defaults, for a program to add to its feature gate (so that
// --feature-gates can set them).
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		featureTerminatingReplicas: {Default: true, PreRelease: featuregate.Beta},
		featurePodDeletionCost:     {Default: true, PreRelease: featuregate.Beta},
	}
}

// Descriptor returns the ReplicaSet controller (replicaset-controller, alias
// replicaset) with o.ConcurrentReplicaSetSyncs workers. It is sharded by
// namespace (a ReplicaSet and its pods share one): under
// --enable-sharding every replica works its slots, each slot with that many
// workers and the controller's one client budget per replica.
func Descriptor(o Options) descriptor.Descriptor {
	workers := o.ConcurrentReplicaSetSyncs
	return descriptor.New(ReplicaSetControllerName, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		return build(ctx, cc, ReplicaSetControllerName, int(workers),
			func(client kubernetes.Interface) kind {
				return rsKind{client: client, inf: cc.InformerFactory.Apps().V1().ReplicaSets()}
			})
	}).
		WithAliases(replicaSetControllerAlias).
		WithValidator(func() error { return validateWorkers("concurrent-replicaset-syncs", workers) }).
		WithIndexers(appsv1.SchemeGroupVersion.WithResource("replicasets"),
			index.ByControllerUIDIndexers()).
		WithIndexers(corev1.SchemeGroupVersion.WithResource("pods"), index.PodsByControllerIndexers()).
		WithReads(corev1.SchemeGroupVersion.WithResource("pods"), podReads...).
		Sharded(shard.ByNamespace)
}

// podReads are the fields of a pod the ReplicaSet logic reads besides its
// metadata: its node (scale-down spreads over nodes), its phase, readiness
// and restarts, and which init containers are sidecars (their restarts
// count apart).
var podReads = []string{
	"spec.nodeName",
	"spec.initContainers.name",
	"spec.initContainers.restartPolicy",
	"status.phase",
	"status.conditions",
	"status.containerStatuses.restartCount",
	"status.initContainerStatuses.name",
	"status.initContainerStatuses.restartCount",
}

// ReplicationControllerDescriptor returns the ReplicationController
// controller (replicationcontroller-controller, alias replicationcontroller)
// with o.ConcurrentRCSyncs workers. It runs the ReplicaSet logic over
// ReplicationControllers, and is sharded by namespace as Descriptor is.
func ReplicationControllerDescriptor(o Options) descriptor.Descriptor {
	workers := o.ConcurrentRCSyncs
	return descriptor.New(ReplicationControllerControllerName, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		return build(ctx, cc, replicationControllerClientName, int(workers),
			func(client kubernetes.Interface) kind {
				return rcKind{
					client: client,
					inf:    cc.InformerFactory.Core().V1().ReplicationControllers(),
				}
			})
	}).
		WithAliases(replicationControllerControllerAlias).
		WithEventSource(replicationControllerEventSource).
		WithClientName(replicationControllerClientName).
		WithValidator(func() error { return validateWorkers("concurrent-rc-syncs", workers) }).
		WithIndexers(corev1.SchemeGroupVersion.WithResource("replicationcontrollers"),
			index.ByControllerUIDIndexers()).
		WithIndexers(corev1.SchemeGroupVersion.WithResource("pods"), index.PodsByControllerIndexers()).
		WithReads(corev1.SchemeGroupVersion.WithResource("pods"), podReads...).
		Sharded(shard.ByNamespace)
}

func build(
	ctx context.Context,
	cc descriptor.Context,
	clientName string,
	workers int,
	newKind func(kubernetes.Interface) kind,
) (descriptor.Controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	c, err := newController(config{
		name:                cc.Name,
		metrics:             cc.Metrics,
		kind:                newKind(client),
		client:              client,
		pods:                cc.InformerFactory.Core().V1().Pods(),
		recorder:            cc.EventRecorder,
		workers:             workers,
		burst:               burstReplicas,
		terminatingReplicas: gate.Enabled(cc.FeatureGate, featureTerminatingReplicas, true),
		deletionCost:        gate.Enabled(cc.FeatureGate, featurePodDeletionCost, true),
		log:                 logr.FromContextOrDiscard(ctx),
	})
	if err != nil {
		return nil, err // the host names the controller
	}
	return c, nil
}
