// Package csr holds what kube-controller-manager's three certificate
// controllers (approving, signing, cleaner) share about a
// CertificateSigningRequest: reading its request, its approval state, and
// the checks of the kubelet's requests, with KCM's error messages (the
// signer reports them in a Failed condition, where users read them).
package csr

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
)

// ParseRequest decodes the first PEM block of a CSR's spec.request, which
// must be a CERTIFICATE REQUEST, into an x509 request.
func ParseRequest(request []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// Decision reports whether the CSR carries an Approved condition and
// whether it carries a Denied one, whatever their status (the API server
// only admits "True" for both).
func Decision(c *certv1.CertificateSigningRequest) (approved, denied bool) {
	for _, cond := range c.Status.Conditions {
		switch cond.Type {
		case certv1.CertificateApproved:
			approved = true
		case certv1.CertificateDenied:
			denied = true
		}
	}
	return approved, denied
}

// Approved reports whether the CSR is approved and not denied.
func Approved(c *certv1.CertificateSigningRequest) bool {
	approved, denied := Decision(c)
	return approved && !denied
}

// HasTrue reports whether the CSR has a condition of type t whose status
// is True or empty.
func HasTrue(c *certv1.CertificateSigningRequest, t certv1.RequestConditionType) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == t && (cond.Status == "" || cond.Status == corev1.ConditionTrue) {
			return true
		}
	}
	return false
}

// Issued reports whether the CSR holds a certificate (kubectl's "Issued").
func Issued(c *certv1.CertificateSigningRequest) bool { return len(c.Status.Certificate) > 0 }

// The errors of the kubelet checks, worded as KCM's.
var (
	errOrganization = errors.New("subject organization is not system:nodes")
	errCommonName   = errors.New("subject common name does not begin with system:node:")
	errNoDNSOrIP    = errors.New("DNS or IP subjectAltName is required")
	errDNS          = errors.New("DNS subjectAltNames are not allowed")
	errEmail        = errors.New("Email subjectAltNames are not allowed")
	errIP           = errors.New("IP subjectAltNames are not allowed")
	errURI          = errors.New("URI subjectAltNames are not allowed")
)

// nodePrefix begins the common name of every kubelet certificate.
const nodePrefix = "system:node:"

// The usages a kubelet may ask for: with or without key encipherment
// (which ECDSA keys do not use).
var (
	clientUsages = usageSet(certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment,
		certv1.UsageClientAuth)
	servingUsages = usageSet(certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment,
		certv1.UsageServerAuth)
)

// usageSet is a set of usages, in sorted order without repeats.
func usageSet(usages ...certv1.KeyUsage) []string {
	out := make([]string, 0, len(usages))
	for _, u := range usages {
		out = append(out, string(u))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// usagesAllowed reports whether the set of usages is want, or want
// without key encipherment; else the error names want.
func usagesAllowed(usages []certv1.KeyUsage, want []string) error {
	got := usageSet(usages...)
	noRSA := slices.DeleteFunc(slices.Clone(want), func(u string) bool {
		return u == string(certv1.UsageKeyEncipherment)
	})
	if slices.Equal(got, want) || slices.Equal(got, noRSA) {
		return nil
	}
	return fmt.Errorf("usages did not match %v", want)
}

func systemNodes(req *x509.CertificateRequest) bool {
	return slices.Equal(req.Subject.Organization, []string{"system:nodes"})
}

// ValidateKubeletClient checks a request for the
// kubernetes.io/kube-apiserver-client-kubelet signer as KCM does, in KCM's
// order (the first failure is the one reported): organization exactly
// system:nodes, no subject alternative name, a common name beginning with
// system:node:, and the usages of a kubelet client.
func ValidateKubeletClient(req *x509.CertificateRequest, usages []certv1.KeyUsage) error {
	switch {
	case !systemNodes(req):
		return errOrganization
	case len(req.DNSNames) > 0:
		return errDNS
	case len(req.EmailAddresses) > 0:
		return errEmail
	case len(req.IPAddresses) > 0:
		return errIP
	case len(req.URIs) > 0:
		return errURI
	case !strings.HasPrefix(req.Subject.CommonName, nodePrefix):
		return errCommonName
	}
	return usagesAllowed(usages, clientUsages)
}

// ValidateKubeletServing checks a request for the
// kubernetes.io/kubelet-serving signer as KCM does, in KCM's order:
// organization exactly system:nodes, at least one DNS or IP name, no email
// or URI name, the usages of a kubelet's serving certificate, and a
// common name beginning with system:node:.
func ValidateKubeletServing(req *x509.CertificateRequest, usages []certv1.KeyUsage) error {
	switch {
	case !systemNodes(req):
		return errOrganization
	case len(req.DNSNames) == 0 && len(req.IPAddresses) == 0:
		return errNoDNSOrIP
	case len(req.EmailAddresses) > 0:
		return errEmail
	case len(req.URIs) > 0:
		return errURI
	}
	if err := usagesAllowed(usages, servingUsages); err != nil {
		return err
	}
	if !strings.HasPrefix(req.Subject.CommonName, nodePrefix) {
		return errCommonName
	}
	return nil
}

// RateLimiter returns the retry limiter of KCM's certificate controllers:
// per CSR, exponential from 200ms to 1000s; overall, 10 retries a second
// with bursts of 100.
func RateLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond,
			1000*time.Second),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
