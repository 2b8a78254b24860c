package csrsigning

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	certv1 "k8s.io/api/certificates/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// ca is a signer's CA, read from its files. It reads them again before
// each certificate it signs, so a rotated CA is used from the next
// certificate on. A pair that does not hold (half written, or a key that
// is not the certificate's) is not taken: the last pair that held is kept,
// as KCM's dynamic file content keeps it.
type ca struct {
	files Files

	mu      sync.Mutex
	certPEM []byte
	keyPEM  []byte
	// cert and key are certPEM and keyPEM parsed; err is why they could
	// not be (then signing fails until the files change).
	cert *x509.Certificate
	key  crypto.Signer
	err  error
	// rejected is why the files were last not taken, logged once.
	rejected string
}

// loadCA reads files; an error is KCM's failure to start.
func loadCA(files Files) (*ca, error) {
	c := &ca{files: files}
	certPEM, keyPEM, err := c.read()
	if err != nil {
		return nil, err
	}
	c.take(certPEM, keyPEM)
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

// read reads the pair and checks that it holds.
func (c *ca) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(c.files.CertFile); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = os.ReadFile(c.files.KeyFile); err != nil {
		return nil, nil, err
	}
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, nil, fmt.Errorf("%s or %s is empty", c.files.CertFile, c.files.KeyFile)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, nil, fmt.Errorf("%s and %s: %w", c.files.CertFile, c.files.KeyFile, err)
	}
	return certPEM, keyPEM, nil
}

// take parses a pair that holds and makes it current.
func (c *ca) take(certPEM, keyPEM []byte) {
	c.certPEM, c.keyPEM, c.cert, c.key, c.err = certPEM, keyPEM, nil, nil, nil
	certs, err := certutil.ParseCertsPEM(certPEM)
	switch {
	case err != nil:
		c.err = fmt.Errorf("CA certificate %s: %w", c.files.CertFile, err)
		return
	case len(certs) != 1:
		c.err = fmt.Errorf("CA certificate %s: holds %d certificates, want exactly 1",
			c.files.CertFile, len(certs))
		return
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		c.err = fmt.Errorf("CA key %s: %w", c.files.KeyFile, err)
		return
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		c.err = fmt.Errorf("CA key %s: %T cannot sign", c.files.KeyFile, key)
		return
	}
	c.cert, c.key = certs[0], signer
}

// current returns the CA as its files now hold it.
func (c *ca) current(log logr.Logger) (*x509.Certificate, crypto.Signer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	certPEM, keyPEM, err := c.read()
	switch {
	case err != nil:
		if err.Error() != c.rejected {
			log.Error(err, "Keeping the CA last read: its files do not hold a certificate and key")
		}
		c.rejected = err.Error()
	case !bytes.Equal(certPEM, c.certPEM) || !bytes.Equal(keyPEM, c.keyPEM):
		c.rejected = ""
		c.take(certPEM, keyPEM)
		if c.err == nil {
			log.Info("Loaded a new CA", "certFile", c.files.CertFile, "keyFile", c.files.KeyFile,
				"subject", c.cert.Subject.String(), "notAfter", c.cert.NotAfter)
		}
	default:
		c.rejected = ""
	}
	return c.cert, c.key, c.err
}

// How certificates are dated, as KCM dates them: valid from five minutes
// before signing (clock skew), and, when they live longer than eight
// hours, ending five minutes early to keep their length.
const (
	backdate = 5 * time.Minute
	short    = 8 * time.Hour
	// minDuration is the shortest validity a request gets.
	minDuration = 10 * time.Minute
)

// serialLimit bounds serial numbers: 128 random bits.
var serialLimit = new(big.Int).Lsh(big.NewInt(1), 128)

// sign issues a certificate for req with the usages, valid for ttl from
// now, and returns it DER-encoded. It copies the request's subject, names
// and public key and nothing else: its extensions are dropped.
func sign(caCert *x509.Certificate, caKey crypto.Signer, req *x509.CertificateRequest,
	usages []certv1.KeyUsage, ttl time.Duration, now time.Time) ([]byte, error) {
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("the request's signature does not verify: %w", err)
	}
	serial, err := rand.Int(rand.Reader, serialLimit)
	if err != nil {
		return nil, fmt.Errorf("drawing a serial number: %w", err)
	}
	keyUsage, extKeyUsage, err := x509Usages(usages)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: req.Subject, DNSNames: req.DNSNames,
		IPAddresses: req.IPAddresses, EmailAddresses: req.EmailAddresses, URIs: req.URIs,
		PublicKeyAlgorithm: req.PublicKeyAlgorithm, PublicKey: req.PublicKey,
		KeyUsage: keyUsage, ExtKeyUsage: extKeyUsage,
		BasicConstraintsValid: true, IsCA: false,
		NotBefore: now.Add(-backdate),
	}
	if ttl < short {
		tmpl.NotAfter = now.Add(ttl)
	} else {
		tmpl.NotAfter = now.Add(ttl - backdate)
	}
	if !tmpl.NotAfter.Before(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	switch {
	case !tmpl.NotBefore.Before(caCert.NotAfter):
		return nil, fmt.Errorf("the signer has expired: NotAfter=%v", caCert.NotAfter)
	case !now.Before(caCert.NotAfter):
		return nil, fmt.Errorf("refusing to sign a certificate that expired in the past: "+
			"NotAfter=%v", caCert.NotAfter)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, req.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("failed to sign certificate: %w", err)
	}
	return der, nil
}

// The x509 meaning of each usage a CSR may ask for.
var (
	keyUsages = map[certv1.KeyUsage]x509.KeyUsage{
		certv1.UsageSigning:           x509.KeyUsageDigitalSignature,
		certv1.UsageDigitalSignature:  x509.KeyUsageDigitalSignature,
		certv1.UsageContentCommitment: x509.KeyUsageContentCommitment,
		certv1.UsageKeyEncipherment:   x509.KeyUsageKeyEncipherment,
		certv1.UsageKeyAgreement:      x509.KeyUsageKeyAgreement,
		certv1.UsageDataEncipherment:  x509.KeyUsageDataEncipherment,
		certv1.UsageCertSign:          x509.KeyUsageCertSign,
		certv1.UsageCRLSign:           x509.KeyUsageCRLSign,
		certv1.UsageEncipherOnly:      x509.KeyUsageEncipherOnly,
		certv1.UsageDecipherOnly:      x509.KeyUsageDecipherOnly,
	}
	extKeyUsages = map[certv1.KeyUsage]x509.ExtKeyUsage{
		certv1.UsageAny:             x509.ExtKeyUsageAny,
		certv1.UsageServerAuth:      x509.ExtKeyUsageServerAuth,
		certv1.UsageClientAuth:      x509.ExtKeyUsageClientAuth,
		certv1.UsageCodeSigning:     x509.ExtKeyUsageCodeSigning,
		certv1.UsageEmailProtection: x509.ExtKeyUsageEmailProtection,
		certv1.UsageSMIME:           x509.ExtKeyUsageEmailProtection,
		certv1.UsageIPsecEndSystem:  x509.ExtKeyUsageIPSECEndSystem,
		certv1.UsageIPsecTunnel:     x509.ExtKeyUsageIPSECTunnel,
		certv1.UsageIPsecUser:       x509.ExtKeyUsageIPSECUser,
		certv1.UsageTimestamping:    x509.ExtKeyUsageTimeStamping,
		certv1.UsageOCSPSigning:     x509.ExtKeyUsageOCSPSigning,
		certv1.UsageMicrosoftSGC:    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
		certv1.UsageNetscapeSGC:     x509.ExtKeyUsageNetscapeServerGatedCrypto,
	}
)

// x509Usages turns usages into key usage bits and extended key usages,
// the latter once each in ascending order; an unknown usage is an error.
func x509Usages(usages []certv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var bits x509.KeyUsage
	var ext []x509.ExtKeyUsage
	var unknown []certv1.KeyUsage
	for _, u := range usages {
		if b, ok := keyUsages[u]; ok {
			bits |= b
		} else if e, ok := extKeyUsages[u]; ok {
			ext = append(ext, e)
		} else {
			unknown = append(unknown, u)
		}
	}
	if len(unknown) > 0 {
		return 0, nil, fmt.Errorf("unrecognized usage values: %q", unknown)
	}
	slices.Sort(ext)
	return bits, slices.Compact(ext), nil
}

// errNoClientAuth is the kube-apiserver-client signer's refusal of a
// request without the client auth usage.
var errNoClientAuth = errors.New("missing required usage for client certificate: client auth")

// validateAPIServerClient checks the usages of a request for the
// kubernetes.io/kube-apiserver-client signer: client auth, with digital
// signature and key encipherment allowed, nothing else.
func validateAPIServerClient(_ *x509.CertificateRequest, usages []certv1.KeyUsage) error {
	clientAuth := false
	for _, u := range usages {
		switch u {
		case certv1.UsageClientAuth:
			clientAuth = true
		case certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment:
		default:
			return fmt.Errorf("invalid usage for client certificate: %s", u)
		}
	}
	if !clientAuth {
		return errNoClientAuth
	}
	return nil
}
