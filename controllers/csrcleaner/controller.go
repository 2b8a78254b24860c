package csrcleaner

import (
	"context"
	"crypto/x509"
	"encoding/pem"
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

	"github.com/ctrlhost/ctrlhost/controllers/internal/csr"
	"github.com/ctrlhost/ctrlhost/controllers/internal/passes"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// KCM's periods: a pass an hour; issued (or approved, or denied, or
// failed) requests kept an hour after the decision, pending or approved
// but unissued ones a day.
const (
	period       = time.Hour
	decidedFor   = time.Hour
	unhandledFor = 24 * time.Hour
)

// controller deletes the requests past their time, in hourly passes.
type controller struct {
	client kubernetes.Interface
	csrs   certlisters.CertificateSigningRequestLister
	synced cache.InformerSynced
	clock  clock.WithTicker
}

func newController(cc descriptor.Context, clk clock.WithTicker) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	informer := cc.InformerFactory.Certificates().V1().CertificateSigningRequests()
	return &controller{client: client, csrs: informer.Lister(),
		synced: informer.Informer().HasSynced, clock: clk}, nil
}

// Run waits for the cache, then makes a pass at once and one an hour
// after each pass ends, until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Cleaning up certificate requests", "period", period)
	defer log.Info("Stopped cleaning up certificate requests")
	passes.Run(ctx, c.clock, c.synced, period, c.pass)
	return nil
}

// pass deletes every cached request past its time. A failed deletion is
// logged and left to the next pass, as in KCM.
func (c *controller) pass(ctx context.Context) {
	log := logr.FromContextOrDiscard(ctx)
	all, err := c.csrs.List(labels.Everything())
	if err != nil {
		log.Error(err, "Listing the cached certificate requests")
		return
	}
	for _, r := range all {
		if ctx.Err() != nil {
			return
		}
		why := expired(r, c.clock.Now())
		if why == "" {
			continue
		}
		err := c.client.CertificatesV1().CertificateSigningRequests().Delete(ctx, r.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &r.UID}})
		switch {
		case err == nil:
			log.Info("Deleted a certificate request", "csr", r.Name, "reason", why)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Gone, or replaced by a new request of the same name.
		default:
			log.Error(err, "Deleting a certificate request", "csr", r.Name, "reason", why)
		}
	}
}

// expired says why r is to be deleted at now, "" when it is not: KCM's
// rules, in KCM's order.
func expired(r *certv1.CertificateSigningRequest, now time.Time) string {
	older := func(t metav1.Time, d time.Duration) bool {
		return !t.IsZero() && now.Sub(t.Time) > d
	}
	has := func(t certv1.RequestConditionType, d time.Duration) bool {
		for _, c := range r.Status.Conditions {
			if c.Type == t && older(c.LastUpdateTime, d) {
				return true
			}
		}
		return false
	}
	issued := csr.Issued(r)
	approved, _ := csr.Decision(r)
	switch {
	case issued && has(certv1.CertificateApproved, decidedFor):
		return "issued, approved more than an hour ago"
	case has(certv1.CertificateDenied, decidedFor):
		return "denied more than an hour ago"
	case has(certv1.CertificateFailed, decidedFor):
		return "failed more than an hour ago"
	case len(r.Status.Conditions) == 0 && older(r.CreationTimestamp, unhandledFor):
		return "pending, created more than a day ago"
	case issued && approved && certificateExpired(r.Status.Certificate, now):
		return "its certificate has expired"
	case !issued && has(certv1.CertificateApproved, unhandledFor):
		return "approved more than a day ago and not issued"
	}
	return ""
}

// certificateExpired reports whether the first certificate of a PEM
// bundle ended before now; a bundle that does not parse has not.
func certificateExpired(bundle []byte, now time.Time) bool {
	block, _ := pem.Decode(bundle)
	if block == nil {
		return false
	}
	certs, err := x509.ParseCertificates(block.Bytes)
	if err != nil || len(certs) == 0 {
		return false
	}
	return now.After(certs[0].NotAfter)
}
