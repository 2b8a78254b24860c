package statefulset

import (
	"context"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Descriptor returns the StatefulSet controller (statefulset-controller,
// alias statefulset) with o.ConcurrentStatefulSetSyncs workers. Invalid
// options are reported by manager.Builder.Build.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		o := o.withDefaults()
		client, err := cc.ClientBuilder.Client(clientName)
		if err != nil {
			return nil, err
		}
		c, err := newController(config{
			name:      cc.Name,
			metrics:   cc.Metrics,
			client:    client,
			sets:      cc.InformerFactory.Apps().V1().StatefulSets(),
			revisions: cc.InformerFactory.Apps().V1().ControllerRevisions(),
			pods:      cc.InformerFactory.Core().V1().Pods(),
			claims:    cc.InformerFactory.Core().V1().PersistentVolumeClaims(),
			recorder:  cc.EventRecorder,
			workers:   int(o.ConcurrentStatefulSetSyncs),
			clock:     o.Clock,
			staleGuard: gate.Enabled(cc.FeatureGate, FeatureStaleControllerConsistency,
				true),
			maxUnavailable: gate.Enabled(cc.FeatureGate, FeatureMaxUnavailable, true),
			semanticRevisions: gate.Enabled(cc.FeatureGate,
				FeatureSemanticRevisionComparison, true),
			recreate: gate.Enabled(cc.FeatureGate, FeatureRecreateStrategy, false),
			log:      logr.FromContextOrDiscard(ctx),
		})
		if err != nil {
			return nil, err
		}
		return c, nil
	}).
		WithAliases(Alias).
		WithValidator(o.Validate).
		WithInformers(appsv1.SchemeGroupVersion.WithResource("statefulsets"),
			appsv1.SchemeGroupVersion.WithResource("controllerrevisions"),
			corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")).
		WithIndexers(corev1.SchemeGroupVersion.WithResource("pods"),
			index.PodsByControllerIndexers()).
		WithReads(corev1.SchemeGroupVersion.WithResource("pods"), podReads...).
		WithReads(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"))
}

// podReads are the fields of a pod the controller reads besides its
// metadata (name, labels, owners, deletion):
//   - its volumes' names and claims: whether its storage matches the set's
//     claim templates;
//   - its phase: created, pending (claims to create), running, terminal
//     (to replace);
//   - its conditions: ready, and since when (available, minReadySeconds).
//
// A pod is written only after a fresh read from the API server.
var podReads = []string{
	"spec.volumes.name",
	"spec.volumes.persistentVolumeClaim",
	"status.phase",
	"status.conditions",
}
