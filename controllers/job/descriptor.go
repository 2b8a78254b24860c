package job

import (
	"context"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/internal/gate"
	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Feature gates consulted through descriptor.Context.FeatureGate when the
// host registers them; otherwise their Kubernetes 1.37 defaults apply.
const (
	// FeatureJobManagedBy: leave Jobs whose spec.managedBy names another
	// controller alone (GA and locked on since 1.35).
	FeatureJobManagedBy featuregate.Feature = "JobManagedBy"
	// FeatureMutableSchedulingDirectivesForSuspendedJobs: suspending a Job
	// clears status.startTime (beta, on by default since 1.36).
	FeatureMutableSchedulingDirectivesForSuspendedJobs featuregate.Feature = "MutableScheduling" +
		"DirectivesForSuspendedJobs"
	// FeatureStaleControllerConsistencyJob: after writing a Job's status or
	// one of its pods, skip syncs of that Job until the informers have
	// delivered the write (beta, on by default since 1.36).
	FeatureStaleControllerConsistencyJob featuregate.Feature = "StaleControllerConsistencyJob"
)

// FeatureSpecs returns the gates above with their Kubernetes 1.37
// defaults, for a program to add to its feature gate (so that
// --feature-gates can set them).
func FeatureSpecs() map[featuregate.Feature]featuregate.FeatureSpec {
	return map[featuregate.Feature]featuregate.FeatureSpec{
		FeatureJobManagedBy: {Default: true, PreRelease: featuregate.GA, LockToDefault: true},
		FeatureMutableSchedulingDirectivesForSuspendedJobs: {
			Default:    true,
			PreRelease: featuregate.Beta,
		},
		FeatureStaleControllerConsistencyJob: {
			Default:    true,
			PreRelease: featuregate.Beta,
		},
	}
}

// Descriptor returns the Job controller (job-controller, alias job) with
// o.ConcurrentJobSyncs workers. Invalid options are reported by
// manager.Builder.Build. It is sharded by namespace (a Job and its pods
// share one): under --enable-sharding every replica works its slots, each
// slot with that many workers.
func Descriptor(o Options) descriptor.Descriptor {
	return descriptor.New(Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		c, err := newFromContext(ctx, cc, o.withDefaults())
		if err != nil {
			return nil, err // the host names the controller
		}
		return c, nil
	}).
		WithAliases(Alias).
		WithValidator(o.Validate).
		WithInformers(batchv1.SchemeGroupVersion.WithResource("jobs")).
		WithIndexers(corev1.SchemeGroupVersion.WithResource("pods"), index.PodsByControllerIndexers()).
		WithReads(corev1.SchemeGroupVersion.WithResource("pods"), podReads...).
		Sharded(shard.ByNamespace)
}

// podReads are the fields of a pod the controller reads besides its
// metadata (labels, owner, finalizers, the completion-index and
// failure-count annotations, creation and deletion times). It patches
// pods (finalizers, ownership), never updates them whole.
var podReads = []string{
	// Whether it is active, terminating, succeeded or failed, and the
	// order in which active pods are deleted (pending, unknown, running).
	"status.phase",
	// Readiness (status.ready, the deletion order, when a failed pod
	// stopped being ready) and the podFailurePolicy's onPodConditions.
	"status.conditions",
	// The deletion order: unscheduled pods first.
	"spec.nodeName",
	// Which init containers are sidecars (restartPolicy Always): their
	// restarts rank apart, their finish counts in a pod's finish time.
	"spec.initContainers.name",
	"spec.initContainers.restartPolicy",
	// Restarts (the deletion order, backoffLimit with restartPolicy
	// OnFailure); exit codes (podFailurePolicy's onExitCodes, by container
	// name); finish times (the pod-failure back-off).
	"status.containerStatuses.name",
	"status.containerStatuses.restartCount",
	"status.containerStatuses.state.terminated.exitCode",
	"status.containerStatuses.state.terminated.finishedAt",
	"status.initContainerStatuses.name",
	"status.initContainerStatuses.restartCount",
	"status.initContainerStatuses.state.terminated.exitCode",
	"status.initContainerStatuses.state.terminated.finishedAt",
}

func newFromContext(ctx context.Context, cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(cc.Name)
	if err != nil {
		return nil, err
	}
	return newController(config{
		name:      cc.Name,
		metrics:   cc.Metrics,
		client:    client,
		jobs:      cc.InformerFactory.Batch().V1().Jobs(),
		pods:      cc.InformerFactory.Core().V1().Pods(),
		recorder:  cc.EventRecorder,
		workers:   int(o.ConcurrentJobSyncs),
		clock:     o.Clock,
		managedBy: gate.Enabled(cc.FeatureGate, FeatureJobManagedBy, true),
		resetStartTimeOnSuspend: gate.Enabled(
			cc.FeatureGate,
			FeatureMutableSchedulingDirectivesForSuspendedJobs,
			true,
		),
		staleGuard: gate.Enabled(
			cc.FeatureGate,
			FeatureStaleControllerConsistencyJob,
			true,
		),
		log: logr.FromContextOrDiscard(ctx),
	})
}
