package csrsigning

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/controllers/internal/csr"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// workersPerSigner is KCM's: five for each signer it runs.
const workersPerSigner = 5

// failureReason is the reason of the Failed condition of a request its
// signer refuses, as KCM writes it.
const failureReason = "SignerValidationFailure"

// A signer signs for one kubernetes.io signer name.
type signer struct {
	ca *ca
	// validate checks a request before it is signed; nil accepts any.
	validate func(*x509.CertificateRequest, []certv1.KeyUsage) error
}

// validators are the checks of each signer (legacy-unknown has none, for
// compatibility, as in KCM).
var validators = map[string]func(*x509.CertificateRequest, []certv1.KeyUsage) error{
	certv1.KubeletServingSignerName:             csr.ValidateKubeletServing,
	certv1.KubeAPIServerClientKubeletSignerName: csr.ValidateKubeletClient,
	certv1.KubeAPIServerClientSignerName:        validateAPIServerClient,
	legacyUnknownSignerName:                     nil,
}

// controller signs approved requests of the kubernetes.io signers it has
// a CA for; keys are CSR names.
type controller struct {
	client  kubernetes.Interface
	csrs    certlisters.CertificateSigningRequestLister
	signers map[string]signer
	ttl     time.Duration
	clock   clock.PassiveClock
	loop    *workloop.Loop
}

func newController(ctx context.Context, cc descriptor.Context, files map[string]Files,
	ttl time.Duration, clk clock.PassiveClock) (*controller, error) {
	c := &controller{ttl: ttl, clock: clk, signers: map[string]signer{}}
	cas := map[Files]*ca{} // one per pair of files, however many signers share it
	for _, name := range signerNames {
		f, ok := files[name]
		if !ok {
			continue
		}
		if cas[f] == nil {
			loaded, err := loadCA(f)
			if err != nil {
				return nil, fmt.Errorf("the CA of the %s signer (%s, %s): %w", name, f.CertFile,
					f.KeyFile, err)
			}
			cas[f] = loaded
			logr.FromContextOrDiscard(ctx).Info("Read a CA", "certFile", f.CertFile,
				"subject", loaded.cert.Subject.String(), "notAfter", loaded.cert.NotAfter)
		}
		c.signers[name] = signer{ca: cas[f], validate: validators[name]}
	}
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	c.client = client
	informer := cc.InformerFactory.Certificates().V1().CertificateSigningRequests()
	c.csrs = informer.Lister()
	// The loop exists before the handler: a running informer (warm
	// standby) calls it at once. On a later failure it is shut down here.
	c.loop = workloop.New(cc.Name, c.sync,
		workloop.Options{Metrics: cc.Metrics, RateLimiter: csr.RateLimiter()})
	if err := c.loop.Watch(informer.Informer(), workloop.EnqueueKey(),
		func(_, obj any) bool { return c.signable(obj) }); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// Run waits for the cache, then signs until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	names := make([]string, 0, len(c.signers))
	for _, n := range signerNames {
		if _, ok := c.signers[n]; ok {
			names = append(names, n)
		}
	}
	log.Info("Signing certificate requests", "signers", names, "maxDuration", c.ttl)
	defer log.Info("Stopped signing certificate requests")
	return c.loop.RunWorkers(ctx, workersPerSigner*len(c.signers))
}

// signable passes the requests to sign or fail: approved, neither failed
// nor issued, for a signer the controller runs.
func (c *controller) signable(obj any) bool {
	r, ok := workloop.Object[*certv1.CertificateSigningRequest](obj)
	if !ok || csr.Issued(r) || !csr.Approved(r) || csr.HasTrue(r, certv1.CertificateFailed) {
		return false
	}
	_, ours := c.signers[r.Spec.SignerName]
	return ours
}

// sync signs one request, or marks it Failed when its signer refuses it.
func (c *controller) sync(ctx context.Context, name string) error {
	cached, err := c.csrs.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !c.signable(cached):
		return nil
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("csr", name,
		"signer", cached.Spec.SignerName)
	s := c.signers[cached.Spec.SignerName]
	req, err := csr.ParseRequest(cached.Spec.Request)
	if err != nil {
		// spec.request is immutable: retrying cannot help.
		return workloop.Permanent(fmt.Errorf("CSR %s: spec.request: %w", name, err))
	}
	next := cached.DeepCopy()
	if s.validate != nil {
		if err := s.validate(req, cached.Spec.Usages); err != nil {
			next.Status.Conditions = append(next.Status.Conditions,
				certv1.CertificateSigningRequestCondition{
					Type: certv1.CertificateFailed, Status: corev1.ConditionTrue,
					Reason: failureReason, Message: err.Error(),
					LastUpdateTime: metav1.NewTime(c.clock.Now()),
				})
			if err := c.write(ctx, next); err != nil {
				return fmt.Errorf("marking CSR %s failed: %w", name, err)
			}
			log.V(2).Info("The signer refused the request", "reason", err.Error())
			return nil
		}
	}
	caCert, caKey, err := s.ca.current(log)
	if err != nil {
		return fmt.Errorf("CSR %s: %w", name, err)
	}
	der, err := sign(caCert, caKey, req, cached.Spec.Usages,
		c.duration(cached.Spec.ExpirationSeconds), c.clock.Now())
	if err != nil {
		return fmt.Errorf("signing CSR %s: %w", name, err)
	}
	next.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := c.write(ctx, next); err != nil {
		return fmt.Errorf("writing the certificate of CSR %s: %w", name, err)
	}
	log.V(2).Info("Signed the request")
	return nil
}

// write updates the request's status, and holds its key back until the
// informer has the update, so that a stale copy is not signed again.
func (c *controller) write(ctx context.Context, r *certv1.CertificateSigningRequest) error {
	updated, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, r,
		metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	c.loop.Wrote(updated.Name, updated)
	return nil
}

// duration is the validity a request gets: --cluster-signing-duration,
// or the shorter spec.expirationSeconds raised to at least ten minutes
// (twice the backdating), as in KCM.
func (c *controller) duration(expirationSeconds *int32) time.Duration {
	if expirationSeconds == nil {
		return c.ttl
	}
	switch asked := time.Duration(*expirationSeconds) * time.Second; {
	case asked > c.ttl:
		return c.ttl
	case asked < minDuration:
		return minDuration
	default:
		return asked
	}
}
