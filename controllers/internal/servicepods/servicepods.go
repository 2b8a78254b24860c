// Package servicepods turns pod changes into the keys of the Services they
// concern, for the Endpoints and EndpointSlice controllers, the way KCM
// does: in a work queue of its own whose workers start once the caches
// have synced, so that the Services of pods seen in the initial listing
// are synced (again) after the controller's first pass, as in KCM.
package servicepods

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"
	esutil "k8s.io/endpointslice/util"
)

// MaxRetries is how often a pod change whose Services cannot be listed is
// retried before it is dropped, as in KCM.
const MaxRetries = 15

// Queue holds pod changes until a worker finds their Services.
type Queue struct {
	services corelisters.ServiceLister
	enqueue  func(key string, delay time.Duration)
	delay    time.Duration
	queue    workqueue.TypedRateLimitingInterface[*esutil.PodProjectionKey]
}

// New returns a Queue that hands each Service concerned by a pod change to
// enqueue with delay (the controller's batch period). Its work queue runs
// a goroutine from here on: Run or ShutDown releases it.
func New(
	services corelisters.ServiceLister,
	enqueue func(key string, delay time.Duration),
	delay time.Duration,
) *Queue {
	return &Queue{
		services: services,
		enqueue:  enqueue,
		delay:    delay,
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.DefaultTypedControllerRateLimiter[*esutil.PodProjectionKey]()),
	}
}

// PodChanged is the pod informer's handler (old nil on add, obj nil on
// delete): a change that can matter to endpoints is queued.
func (q *Queue) PodChanged(old, obj any) {
	if key := esutil.GetPodUpdateProjectionKey(old, obj); key != nil {
		q.queue.Add(key)
	}
}

// Len is the number of pod changes waiting.
func (q *Queue) Len() int { return q.queue.Len() }

// ShutDown releases the queue without running workers.
func (q *Queue) ShutDown() { q.queue.ShutDown() }

// Run processes pod changes with the given number of workers until ctx is
// done; it returns after every worker has, and shuts the queue down.
func (q *Queue) Run(ctx context.Context, workers int) {
	defer q.queue.ShutDown()
	log := logr.FromContextOrDiscard(ctx)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for q.ProcessNext(log) {
			}
		})
	}
	<-ctx.Done()
	q.queue.ShutDown()
	wg.Wait()
}

// ProcessNext handles one pod change; false once the queue is shut down.
func (q *Queue) ProcessNext(log logr.Logger) bool {
	key, quit := q.queue.Get()
	if quit {
		return false
	}
	defer q.queue.Done(key)
	services, err := esutil.GetServicesToUpdate(q.services, key)
	switch {
	case err == nil:
		q.queue.Forget(key)
		for svc := range services {
			q.enqueue(svc, q.delay)
		}
	case q.queue.NumRequeues(key) < MaxRetries:
		log.V(2).
			Info("Listing the Services of a pod failed, retrying", "namespace", key.Namespace,
				"err", err.Error())
		q.queue.AddRateLimited(key)
	default:
		log.Error(err, "Dropping a pod change after too many retries", "namespace", key.Namespace)
		q.queue.Forget(key)
	}
	return true
}
