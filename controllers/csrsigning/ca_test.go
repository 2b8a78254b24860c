package csrsigning

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	certv1 "k8s.io/api/certificates/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/csr"
	"github.com/ctrlhost/ctrlhost/controllers/internal/csr/csrtest"
)

var now = controllertest.Epoch

func parsedRequest(t *testing.T, s csrtest.Subject) *x509.CertificateRequest {
	t.Helper()
	req, err := csr.ParseRequest(csrtest.Request(t, s))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestSignDatesAsKCM(t *testing.T) {
	longCA := csrtest.NewCA(t, "ca", now.Add(-time.Hour), now.Add(10*365*24*time.Hour))
	shortCA := csrtest.NewCA(t, "ca", now.Add(-time.Hour), now.Add(48*time.Hour))
	tests := []struct {
		name          string
		ca            *csrtest.CA
		ttl           time.Duration
		wantNotAfter  time.Time
		wantNotBefore time.Time
	}{
		{"a year: backdated at both ends", longCA, 8760 * time.Hour,
			now.Add(8760*time.Hour - 5*time.Minute), now.Add(-5 * time.Minute)},
		{"eight hours: still long", longCA, 8 * time.Hour,
			now.Add(8*time.Hour - 5*time.Minute), now.Add(-5 * time.Minute)},
		{"short: ends a full ttl after now", longCA, time.Hour, now.Add(time.Hour),
			now.Add(-5 * time.Minute)},
		{"cut at the CA's end", shortCA, 8760 * time.Hour, now.Add(48 * time.Hour),
			now.Add(-5 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			der, err := sign(tt.ca.Cert, tt.ca.Key, parsedRequest(t, csrtest.Node("n")),
				[]certv1.KeyUsage{certv1.UsageClientAuth}, tt.ttl, now)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := x509.ParseCertificate(der)
			if err != nil {
				t.Fatal(err)
			}
			// x509 keeps seconds.
			if !cert.NotAfter.Equal(tt.wantNotAfter.Truncate(time.Second)) ||
				!cert.NotBefore.Equal(tt.wantNotBefore.Truncate(time.Second)) {
				t.Errorf("valid %v to %v, want %v to %v", cert.NotBefore, cert.NotAfter,
					tt.wantNotBefore, tt.wantNotAfter)
			}
		})
	}
}

func TestSignRefusesAnExpiredCA(t *testing.T) {
	for _, tt := range []struct {
		name     string
		caEnd    time.Time
		contains string
	}{
		{"ended before the backdated start", now.Add(-10 * time.Minute), "the signer has expired"},
		{"ends within the backdating", now.Add(-time.Minute),
			"refusing to sign a certificate that expired in the past"},
		{"ends exactly now", now, "refusing to sign a certificate that expired in the past"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ca := csrtest.NewCA(t, "ca", now.Add(-time.Hour), tt.caEnd)
			_, err := sign(ca.Cert, ca.Key, parsedRequest(t, csrtest.Node("n")), nil, time.Hour,
				now)
			if err == nil || !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("error %v, want one containing %q", err, tt.contains)
			}
		})
	}
}

// TestSignCopiesNamesAndUsagesOnly: the certificate has the request's
// subject, names and key, the usages asked for (synonyms merged, extended
// usages sorted), no CA rights, and none of the request's extensions.
func TestSignCopiesNamesAndUsagesOnly(t *testing.T) {
	ca := csrtest.NewCA(t, "ca", now.Add(-time.Hour), now.Add(24*time.Hour))
	s := csrtest.Node("n")
	s.DNSNames, s.IPs = []string{"n.example"}, []string{"10.0.0.1"}
	s.URIs = []string{"spiffe://a/b"}
	req := parsedRequest(t, s)
	extra := pkix.Extension{Id: asn1.ObjectIdentifier{1, 2, 3, 4}, Value: []byte{5, 0}}
	req.Extensions = append(req.Extensions, extra)
	usages := []certv1.KeyUsage{certv1.UsageServerAuth, certv1.UsageSigning,
		certv1.UsageDigitalSignature, certv1.UsageSMIME, certv1.UsageEmailProtection,
		certv1.UsageClientAuth, certv1.UsageKeyEncipherment}
	der, err := sign(ca.Cert, ca.Key, req, usages, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:n" ||
		!slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) ||
		!slices.Equal(cert.DNSNames, s.DNSNames) || len(cert.IPAddresses) != 1 ||
		len(cert.URIs) != 1 {
		t.Errorf("subject %v, names %v %v %v", cert.Subject, cert.DNSNames, cert.IPAddresses,
			cert.URIs)
	}
	if cert.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment {
		t.Errorf("key usage %b", cert.KeyUsage)
	}
	wantExt := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth,
		x509.ExtKeyUsageEmailProtection}
	if !slices.Equal(cert.ExtKeyUsage, wantExt) {
		t.Errorf("extended key usages %v, want %v", cert.ExtKeyUsage, wantExt)
	}
	if cert.IsCA || !cert.BasicConstraintsValid {
		t.Error("want basic constraints saying not a CA")
	}
	for _, e := range cert.Extensions {
		if e.Id.Equal(extra.Id) {
			t.Error("the request's own extension was copied")
		}
	}
	if !bytes.Equal(cert.RawIssuer, ca.Cert.RawSubject) {
		t.Error("not issued by the CA")
	}
	if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
		t.Error(err)
	}
	if _, err := sign(ca.Cert, ca.Key, req, []certv1.KeyUsage{"bogus"}, time.Hour,
		now); err == nil || !strings.Contains(err.Error(), `unrecognized usage values: ["bogus"]`) {
		t.Errorf("unknown usage: error %v", err)
	}
}

func TestValidateAPIServerClient(t *testing.T) {
	for _, tt := range []struct {
		usages []certv1.KeyUsage
		want   string
	}{
		{[]certv1.KeyUsage{certv1.UsageClientAuth}, ""},
		{[]certv1.KeyUsage{certv1.UsageKeyEncipherment, certv1.UsageDigitalSignature,
			certv1.UsageClientAuth}, ""},
		{[]certv1.KeyUsage{certv1.UsageDigitalSignature},
			"missing required usage for client certificate: client auth"},
		{[]certv1.KeyUsage{certv1.UsageClientAuth, certv1.UsageServerAuth},
			"invalid usage for client certificate: server auth"},
	} {
		err := validateAPIServerClient(nil, tt.usages)
		if got := errString(err); got != tt.want {
			t.Errorf("usages %q: error %q, want %q", tt.usages, got, tt.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// writeCA writes the CA's certificate and key to dir and returns the
// files.
func writeCA(t *testing.T, dir string, certPEM, keyPEM []byte) Files {
	t.Helper()
	f := Files{filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")}
	if err := os.WriteFile(f.CertFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.KeyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCAFollowsItsFiles: a rotated pair is used from the next signing; a
// pair that does not hold is not taken; a pair that holds but is not one
// CA fails signing until the files are fixed.
func TestCAFollowsItsFiles(t *testing.T) {
	dir := t.TempDir()
	one := csrtest.NewCA(t, "one", now.Add(-time.Hour), now.Add(time.Hour))
	two := csrtest.NewCA(t, "two", now.Add(-time.Hour), now.Add(time.Hour))
	f := writeCA(t, dir, one.CertPEM, one.KeyPEM)
	c, err := loadCA(f)
	if err != nil {
		t.Fatal(err)
	}
	log := logr.Discard()
	subject := func() string {
		t.Helper()
		cert, _, err := c.current(log)
		if err != nil {
			t.Fatal(err)
		}
		return cert.Subject.CommonName
	}
	if got := subject(); got != "one" {
		t.Fatalf("CA %q, want one", got)
	}
	writeCA(t, dir, two.CertPEM, two.KeyPEM)
	if got := subject(); got != "two" {
		t.Fatalf("after rotation: CA %q, want two", got)
	}
	writeCA(t, dir, one.CertPEM, two.KeyPEM) // half rotated
	if got := subject(); got != "two" {
		t.Errorf("with a mismatched pair: CA %q, want two kept", got)
	}
	if err := os.Remove(f.KeyFile); err != nil {
		t.Fatal(err)
	}
	if got := subject(); got != "two" {
		t.Errorf("with the key gone: CA %q, want two kept", got)
	}
	writeCA(t, dir, append(slices.Clone(two.CertPEM), one.CertPEM...), two.KeyPEM)
	if _, _, err := c.current(log); err == nil || !strings.Contains(err.Error(), "2 certificates") {
		t.Errorf("with two certificates: error %v", err)
	}
	writeCA(t, dir, one.CertPEM, one.KeyPEM)
	if got := subject(); got != "one" {
		t.Errorf("fixed: CA %q, want one", got)
	}
}

func TestLoadCARefusesBadFiles(t *testing.T) {
	one := csrtest.NewCA(t, "one", now.Add(-time.Hour), now.Add(time.Hour))
	two := csrtest.NewCA(t, "two", now.Add(-time.Hour), now.Add(time.Hour))
	rsaKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte("junk")})
	for _, tt := range []struct {
		name      string
		cert, key []byte
	}{
		{"mismatched", one.CertPEM, two.KeyPEM},
		{"empty key", one.CertPEM, nil},
		{"junk key", one.CertPEM, rsaKey},
		{"two certificates", append(slices.Clone(one.CertPEM), two.CertPEM...), one.KeyPEM},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := loadCA(writeCA(t, t.TempDir(), tt.cert, tt.key)); err == nil {
				t.Error("loaded")
			}
		})
	}
	if _, err := loadCA(Files{"/nonexistent/ca.crt", "/nonexistent/ca.key"}); err == nil {
		t.Error("loaded missing files")
	}
}
