package csrapproving

import (
	"context"
	"crypto/x509"
	"fmt"

	"github.com/go-logr/logr"
	authorizationv1 "k8s.io/api/authorization/v1"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/csr"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/workloop"
)

// workers is KCM's: five.
const workers = 5

// A permission is one way a kubelet client CSR may be approved: the
// requester may create CSRs' subresource, and, when self is set, asks
// for a certificate in its own name.
type permission struct {
	subresource string
	self        bool
	message     string
}

// permissions are tried in KCM's order: renewing one's own certificate
// first, then a client certificate for any node (a bootstrap token's).
var permissions = []permission{
	{subresource: "selfnodeclient", self: true, message: SelfNodeMessage},
	{subresource: "nodeclient", message: NodeMessage},
}

// controller approves kubelet client CSRs; keys are CSR names.
type controller struct {
	client kubernetes.Interface
	csrs   certlisters.CertificateSigningRequestLister
	loop   *workloop.Loop
}

func newController(cc descriptor.Context) (*controller, error) {
	client, err := cc.ClientBuilder.Client(clientName)
	if err != nil {
		return nil, err
	}
	informer := cc.InformerFactory.Certificates().V1().CertificateSigningRequests()
	c := &controller{client: client, csrs: informer.Lister()}
	// The loop exists before the handler: a running informer (warm
	// standby) calls it at once. On a later failure it is shut down here.
	c.loop = workloop.New(cc.Name, c.sync,
		workloop.Options{Metrics: cc.Metrics, RateLimiter: csr.RateLimiter()})
	if err := c.loop.Watch(informer.Informer(), workloop.EnqueueKey(), undecided); err != nil {
		c.loop.ShutDown()
		return nil, err
	}
	return c, nil
}

// Run waits for the cache, then approves until ctx is done.
func (c *controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	log.Info("Approving kubelet client certificate requests")
	defer log.Info("Stopped approving certificate requests")
	return c.loop.RunWorkers(ctx, workers)
}

// undecided passes the kubelet client CSRs that have neither a decision
// nor a certificate: the only ones the controller may approve.
func undecided(_, obj any) bool {
	r, ok := workloop.Object[*certv1.CertificateSigningRequest](obj)
	if !ok || r.Spec.SignerName != certv1.KubeAPIServerClientKubeletSignerName || csr.Issued(r) {
		return false
	}
	approved, denied := csr.Decision(r)
	return !approved && !denied
}

// sync approves one CSR if it is a kubelet client request that its
// requester is allowed to have approved.
func (c *controller) sync(ctx context.Context, name string) error {
	cached, err := c.csrs.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !undecided(nil, cached):
		return nil
	}
	req, err := csr.ParseRequest(cached.Spec.Request)
	if err != nil {
		// spec.request is immutable: retrying cannot help.
		return workloop.Permanent(fmt.Errorf("CSR %s: spec.request: %w", name, err))
	}
	if csr.ValidateKubeletClient(req, cached.Spec.Usages) != nil {
		return nil
	}
	var tried []string
	for _, p := range permissions {
		if p.self && cached.Spec.Username != req.Subject.CommonName {
			continue
		}
		tried = append(tried, p.subresource)
		allowed, err := c.allowed(ctx, cached, p.subresource)
		if err != nil {
			return fmt.Errorf("CSR %s: SubjectAccessReview for %s: %w", name, p.subresource, err)
		}
		if allowed {
			return c.approve(ctx, cached, req, p.message)
		}
	}
	// The requester may be granted the permission later: retried with
	// back-off, as in KCM.
	return fmt.Errorf("CSR %s is a kubelet client request (%v) but its SubjectAccessReview "+
		"was not allowed", name, tried)
}

// allowed asks the API server whether the CSR's requester may create the
// subresource of certificatesigningrequests.
func (c *controller) allowed(ctx context.Context, r *certv1.CertificateSigningRequest,
	subresource string) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(r.Spec.Extra))
	for k, v := range r.Spec.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review, err := c.client.AuthorizationV1().SubjectAccessReviews().Create(ctx,
		&authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: r.Spec.Username, UID: r.Spec.UID, Groups: r.Spec.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: certv1.GroupName, Version: "*", Resource: "certificatesigningrequests",
				Subresource: subresource, Verb: "create",
			},
		}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
}

// approve adds the Approved condition through the approval subresource.
func (c *controller) approve(ctx context.Context, cached *certv1.CertificateSigningRequest,
	req *x509.CertificateRequest, message string) error {
	next := cached.DeepCopy()
	next.Status.Conditions = append(next.Status.Conditions,
		certv1.CertificateSigningRequestCondition{
			Type: certv1.CertificateApproved, Status: corev1.ConditionTrue,
			Reason: Reason, Message: message,
		})
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx,
		next.Name, next, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("approving CSR %s: %w", next.Name, err)
	}
	logr.FromContextOrDiscard(ctx).V(2).Info("Approved kubelet client certificate request",
		"csr", next.Name, "commonName", req.Subject.CommonName, "requester", next.Spec.Username)
	return nil
}
