package daemonset

import (
	"context"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Names, as kube-controller-manager has them.
const (
	Name  = "daemonset-controller"
	Alias = "daemonset"
	// clientName is the name KCM asks its client builder for: the user
	// agent's suffix and, with --use-service-account-credentials, the
	// ServiceAccount (kube-system/daemon-set-controller) whose bootstrap
	// RBAC role grants what this controller does.
	clientName = "daemon-set-controller"
)

// Feature gates consulted through descriptor.Context.FeatureGate when the
// host registers them; otherwise their Kubernetes 1.37 defaults apply.
const (
	// FeatureStaleControllerConsistency: hold a DaemonSet back until the
	// informers have delivered the pods and status this controller wrote
	// for it (beta, on by default since 1.36).
	FeatureStaleControllerConsistency featuregate.Feature = "StaleControllerConsistencyDaemonSet"
	// FeatureTaintTolerationComparisonOperators: tolerations with the Lt
	// and Gt operators compare numerically (alpha, off by default).
	FeatureTaintTolerationComparisonOperators featuregate.Feature = "TaintToleration" +
		"ComparisonOperators"
)

// FeatureSpecs returns the gates above with their Kubernetes 1.37
// defaults, for a program to add to its feature gate (so that
// --feature-gates can set them).
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeatureStaleControllerConsistency:         {Default: true, PreRelease: featuregate.Beta},
		FeatureTaintTolerationComparisonOperators: {Default: false, PreRelease: featuregate.Alpha},
	}
}

// Descriptor returns the DaemonSet controller (daemonset-controller, alias
// daemonset) with o.ConcurrentDaemonSetSyncs workers. Invalid options are
// reported by manager.Builder.Build.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		o := o.withDefaults()
		client, err := cc.ClientBuilder.Client(clientName)
		if err != nil {
			return nil, err
		}
		c, err := newController(config{
			name:       cc.Name,
			metrics:    cc.Metrics,
			client:     client,
			daemonSets: cc.InformerFactory.Apps().V1().DaemonSets(),
			revisions:  cc.InformerFactory.Apps().V1().ControllerRevisions(),
			pods:       cc.InformerFactory.Core().V1().Pods(),
			nodes:      cc.InformerFactory.Core().V1().Nodes(),
			recorder:   cc.EventRecorder,
			workers:    int(o.ConcurrentDaemonSetSyncs),
			clock:      o.Clock,
			staleGuard: gate.Enabled(cc.FeatureGate, FeatureStaleControllerConsistency, true),
			comparisonTaints: gate.Enabled(
				cc.FeatureGate,
				FeatureTaintTolerationComparisonOperators,
				false,
			),
			log: logr.FromContextOrDiscard(ctx),
		})
		if err != nil {
			return nil, err // the host names the controller
		}
		return c, nil
	}).
		WithAliases(Alias).
		WithValidator(o.Validate).
		WithInformers(appsv1.SchemeGroupVersion.WithResource("daemonsets"),
			appsv1.SchemeGroupVersion.WithResource("controllerrevisions"),
			corev1.SchemeGroupVersion.WithResource("nodes")).
		WithIndexers(corev1.SchemeGroupVersion.WithResource("pods"), index.PodsByControllerIndexers()).
		WithReads(corev1.SchemeGroupVersion.WithResource("pods"), podReads...).
		WithIndexers(corev1.SchemeGroupVersion.WithResource("pods"), index.PodsByNodeIndexers()).
		WithClientName(clientName)
}

// podReads are the fields of a pod the controller reads besides its
// metadata (labels, owner, creation and deletion times):
//   - the node it is bound to: the node index, the node a pod is for,
//     unbound pods whose node is gone, and bound pods ranked before
//     unbound ones when a node has several;
//   - the metadata.name field requirement of its required node affinity:
//     the node an unbound pod is for (targetNode);
//   - its phase: failed and succeeded pods are deleted (and replaced),
//     terminated pods being deleted are left out;
//   - its conditions: whether it is ready, and since when (available),
//     for the status counts, surge, the rolling update, and the requeue
//     of a pod turning ready.
var podReads = []string{
	"spec.nodeName",
	"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution." +
		"nodeSelectorTerms.matchFields",
	"status.phase",
	"status.conditions",
}
