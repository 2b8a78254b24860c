package cronjob

import (
	"context"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/index"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/shard"
)

// Descriptor returns the CronJob controller (cronjob-controller, alias
// cronjob) with o.ConcurrentCronJobSyncs workers. Invalid options are
// reported by manager.Builder.Build. It is sharded by namespace (a CronJob
// and its Jobs share one): under --enable-sharding every replica works its
// slots, each slot with that many workers.
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
		WithInformers(batchv1.SchemeGroupVersion.WithResource("cronjobs")).
		WithIndexers(batchv1.SchemeGroupVersion.WithResource("jobs"), index.ByControllerUIDIndexers()).
		Sharded(shard.ByNamespace)
}

func newFromContext(ctx context.Context, cc descriptor.Context, o Options) (*controller, error) {
	client, err := cc.ClientBuilder.Client(cc.Name)
	if err != nil {
		return nil, err
	}
	return newController(config{
		name:     cc.Name,
		metrics:  cc.Metrics,
		client:   client,
		cronJobs: cc.InformerFactory.Batch().V1().CronJobs(),
		jobs:     cc.InformerFactory.Batch().V1().Jobs(),
		recorder: cc.EventRecorder,
		workers:  int(o.ConcurrentCronJobSyncs),
		clock:    o.Clock,
		log:      logr.FromContextOrDiscard(ctx),
	})
}
