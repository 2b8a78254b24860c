package csr_test

import (
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/csr"
	"github.com/ctrlhost/ctrlhost/controllers/internal/csr/csrtest"
)

const (
	sign      = certv1.UsageDigitalSignature
	encipher  = certv1.UsageKeyEncipherment
	client    = certv1.UsageClientAuth
	server    = certv1.UsageServerAuth
	wantOrg   = "subject organization is not system:nodes"
	wantCN    = "subject common name does not begin with system:node:"
	usagesErr = "usages did not match "
)

func TestValidateKubeletClient(t *testing.T) {
	node := csrtest.Node("n1")
	with := func(f func(*csrtest.Subject)) csrtest.Subject {
		s := csrtest.Node("n1")
		f(&s)
		return s
	}
	tests := []struct {
		name    string
		subject csrtest.Subject
		usages  []certv1.KeyUsage
		want    string // "" valid
	}{
		{"RSA usages", node, []certv1.KeyUsage{sign, encipher, client}, ""},
		{"ECDSA usages, repeated", node, []certv1.KeyUsage{client, sign, client}, ""},
		{"no client auth", node, []certv1.KeyUsage{sign, encipher},
			usagesErr + "[client auth digital signature key encipherment]"},
		{"server auth too", node, []certv1.KeyUsage{sign, client, server},
			usagesErr + "[client auth digital signature key encipherment]"},
		{"two organizations", with(func(s *csrtest.Subject) {
			s.Organization = []string{"system:nodes", "x"}
		}), []certv1.KeyUsage{sign, client}, wantOrg},
		{"organization first, before the SANs", with(func(s *csrtest.Subject) {
			s.Organization, s.DNSNames = nil, []string{"a"}
		}), []certv1.KeyUsage{sign, client}, wantOrg},
		{"DNS", with(func(s *csrtest.Subject) { s.DNSNames = []string{"a"} }),
			[]certv1.KeyUsage{sign, client}, "DNS subjectAltNames are not allowed"},
		{"email", with(func(s *csrtest.Subject) { s.Emails = []string{"a@b.c"} }),
			[]certv1.KeyUsage{sign, client}, "Email subjectAltNames are not allowed"},
		{"IP", with(func(s *csrtest.Subject) { s.IPs = []string{"10.0.0.1"} }),
			[]certv1.KeyUsage{sign, client}, "IP subjectAltNames are not allowed"},
		{"URI", with(func(s *csrtest.Subject) { s.URIs = []string{"spiffe://x/y"} }),
			[]certv1.KeyUsage{sign, client}, "URI subjectAltNames are not allowed"},
		{"common name before usages", with(func(s *csrtest.Subject) { s.CommonName = "n1" }),
			[]certv1.KeyUsage{server}, wantCN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := csr.ParseRequest(csrtest.Request(t, tt.subject))
			if err != nil {
				t.Fatal(err)
			}
			check(t, csr.ValidateKubeletClient(req, tt.usages), tt.want)
		})
	}
}

func TestValidateKubeletServing(t *testing.T) {
	with := func(f func(*csrtest.Subject)) csrtest.Subject {
		s := csrtest.Node("n1")
		s.DNSNames = []string{"n1.example"}
		f(&s)
		return s
	}
	ok := with(func(*csrtest.Subject) {})
	tests := []struct {
		name    string
		subject csrtest.Subject
		usages  []certv1.KeyUsage
		want    string
	}{
		{"RSA usages", ok, []certv1.KeyUsage{sign, encipher, server}, ""},
		{"ECDSA usages, an IP only", with(func(s *csrtest.Subject) {
			s.DNSNames, s.IPs = nil, []string{"10.0.0.1"}
		}), []certv1.KeyUsage{server, sign}, ""},
		{"no SAN", with(func(s *csrtest.Subject) { s.DNSNames = nil }),
			[]certv1.KeyUsage{sign, server}, "DNS or IP subjectAltName is required"},
		{"email", with(func(s *csrtest.Subject) { s.Emails = []string{"a@b.c"} }),
			[]certv1.KeyUsage{sign, server}, "Email subjectAltNames are not allowed"},
		{"URI", with(func(s *csrtest.Subject) { s.URIs = []string{"spiffe://x/y"} }),
			[]certv1.KeyUsage{sign, server}, "URI subjectAltNames are not allowed"},
		{"client auth", ok, []certv1.KeyUsage{sign, client},
			usagesErr + "[digital signature key encipherment server auth]"},
		{"usages before common name", with(func(s *csrtest.Subject) { s.CommonName = "n1" }),
			[]certv1.KeyUsage{client},
			usagesErr + "[digital signature key encipherment server auth]"},
		{"common name", with(func(s *csrtest.Subject) { s.CommonName = "n1" }),
			[]certv1.KeyUsage{sign, server}, wantCN},
		{"organization", with(func(s *csrtest.Subject) { s.Organization = []string{"x"} }),
			[]certv1.KeyUsage{sign, server}, wantOrg},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := csr.ParseRequest(csrtest.Request(t, tt.subject))
			if err != nil {
				t.Fatal(err)
			}
			check(t, csr.ValidateKubeletServing(req, tt.usages), tt.want)
		})
	}
}

func check(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("error %v, want none", err)
	case want != "" && (err == nil || err.Error() != want):
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestParseRequest(t *testing.T) {
	if _, err := csr.ParseRequest(csrtest.Request(t, csrtest.Node("n"))); err != nil {
		t.Error(err)
	}
	ca := csrtest.NewCA(t, "ca", time.Now(), time.Now().Add(time.Hour))
	for _, bad := range [][]byte{nil, []byte("junk"), ca.CertPEM} {
		if _, err := csr.ParseRequest(bad); err == nil {
			t.Errorf("ParseRequest(%.20q) succeeded", bad)
		}
	}
}

func TestConditions(t *testing.T) {
	type condition = certv1.CertificateSigningRequestCondition
	r := func(conds ...condition) *certv1.CertificateSigningRequest {
		c := csrtest.CSR("r", "s", "u", nil)
		c.Status.Conditions = conds
		return c
	}
	cond := func(t certv1.RequestConditionType,
		s corev1.ConditionStatus) certv1.CertificateSigningRequestCondition {
		return certv1.CertificateSigningRequestCondition{Type: t, Status: s}
	}
	approved := cond(certv1.CertificateApproved, corev1.ConditionTrue)
	denied := cond(certv1.CertificateDenied, corev1.ConditionTrue)
	if !csr.Approved(r(approved)) || csr.Approved(r(approved, denied)) || csr.Approved(r()) {
		t.Error("Approved: want approved and not denied")
	}
	for _, tt := range []struct {
		c    certv1.CertificateSigningRequestCondition
		want bool
	}{
		{cond(certv1.CertificateFailed, corev1.ConditionTrue), true},
		{cond(certv1.CertificateFailed, ""), true},
		{cond(certv1.CertificateFailed, corev1.ConditionFalse), false},
		{cond(certv1.CertificateApproved, corev1.ConditionTrue), false},
	} {
		if got := csr.HasTrue(r(tt.c), certv1.CertificateFailed); got != tt.want {
			t.Errorf("HasTrue(%+v, Failed) = %v, want %v", tt.c, got, tt.want)
		}
	}
}
