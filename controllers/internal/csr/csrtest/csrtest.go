// Package csrtest makes the requests, CAs and CSR objects that the tests
// of the certificate controllers share. It is for tests only.
package csrtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Subject is what a request asks for.
type Subject struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []string
	Emails       []string
	URIs         []string
}

// Request returns a PEM CERTIFICATE REQUEST for s over a fresh P-256 key.
func Request(t testing.TB, s Subject) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{
		Subject:        pkix.Name{CommonName: s.CommonName, Organization: s.Organization},
		DNSNames:       s.DNSNames,
		EmailAddresses: s.Emails,
	}
	for _, ip := range s.IPs {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	for _, u := range s.URIs {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// Node is the subject of a kubelet's client request for node.
func Node(node string) Subject {
	return Subject{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}
}

// CSR returns a CertificateSigningRequest named name for signer, from
// username, with the usages and request.
func CSR(name, signer, username string, request []byte,
	usages ...certv1.KeyUsage) *certv1.CertificateSigningRequest {
	return &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
			ResourceVersion: "1"},
		Spec: certv1.CertificateSigningRequestSpec{
			Request: request, SignerName: signer, Usages: usages,
			Username: username, Groups: []string{"system:authenticated"},
		},
	}
}

// With returns c with a condition of type t added, updated at updated.
func With(c *certv1.CertificateSigningRequest, t certv1.RequestConditionType,
	updated time.Time) *certv1.CertificateSigningRequest {
	c.Status.Conditions = append(c.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: "Test",
		LastUpdateTime: metav1.NewTime(updated),
	})
	return c
}

// CA is a self-signed certificate authority.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte // PKCS#8
}

// NewCA returns a CA valid from notBefore to notAfter.
func NewCA(t testing.TB, name string, notBefore, notAfter time.Time) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}
}

// Issue returns a PEM certificate for cn signed by the CA, valid from
// notBefore to notAfter.
func (ca *CA) Issue(t testing.TB, cn string, notBefore, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
