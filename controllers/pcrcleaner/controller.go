package pcrcleaner

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/passes"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// KCM's periods: a pass every five minutes after the last one ended; a
// request is deleted fifteen minutes after its creation (every request's
// flow is expected to be over by then).
const (
	Period  = 5 * time.Minute
	MaxAge  = 15 * time.Minute
	workers = 1
)

// controller deletes the requests past MaxAge, in passes.
type controller struct {
	client   kubernetes.Interface
	requests certlisters.PodCertificateRequestLister
	synced   cache.InformerSynced
	clock    clock.WithTicker
}

func newController(cc descriptor.Context, clk clock.WithTicker) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	informer := cc.InformerFactory.Certificates().V1().PodCertificateRequests()
	return &controller{client: client, requests: informer.Lister(),
		synced: informer.Informer().HasSynced, clock: clk}, nil
}

// Run waits for the cache, then makes a pass at once and another Period
// after each pass ends, until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Cleaning up pod certificate requests", "period", Period, "maxAge", MaxAge)
	defer log.Info("Stopped cleaning up pod certificate requests")
	passes.Run(ctx, c.clock, c.synced, Period, c.pass)
	return nil
}

// pass deletes every cached request created MaxAge ago or earlier, each
// only if it is still the one cached (a UID precondition). A failed
// deletion is logged and left to the next pass, as in KCM.
func (c *controller) pass(ctx context.Context) {
	log := logr.FromContextOrDiscard(ctx)
	all, err := c.requests.List(labels.Everything())
	if err != nil {
		log.Error(err, "Listing the cached pod certificate requests")
		return
	}
	now := c.clock.Now()
	for _, r := range all {
		if ctx.Err() != nil {
			return
		}
		if !expired(r, now) {
			continue
		}
		err := c.client.CertificatesV1().PodCertificateRequests(r.Namespace).Delete(ctx, r.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &r.UID}})
		switch {
		case err == nil:
			log.V(2).Info("Deleted a pod certificate request", "podCertificateRequest",
				klogRef(r), "created", r.CreationTimestamp.Time)
		case apierrors.IsNotFound(err):
			// Gone already.
		default:
			log.Error(err, "Deleting a pod certificate request", "podCertificateRequest",
				klogRef(r))
		}
	}
}

// expired says whether r is MaxAge old or older at now: KCM's rule.
func expired(r *certv1.PodCertificateRequest, now time.Time) bool {
	return !now.Before(r.CreationTimestamp.Add(MaxAge))
}

// klogRef names r as "namespace/name" in logs.
func klogRef(r *certv1.PodCertificateRequest) string { return r.Namespace + "/" + r.Name }
