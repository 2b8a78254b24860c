package csrsigning

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/csr/csrtest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

const (
	serving   = certv1.KubeletServingSignerName
	apiClient = certv1.KubeAPIServerClientSignerName
	kubelet   = certv1.KubeAPIServerClientKubeletSignerName
)

type fixture struct {
	c      *controller
	client *fake.Clientset
	ca     *csrtest.CA
}

// newFixture runs the signers named, all with one CA, a year's maximum
// duration and the clock at now, over r cached and in the API.
func newFixture(t *testing.T, r *certv1.CertificateSigningRequest, signers ...string) *fixture {
	t.Helper()
	f := &fixture{client: fake.NewClientset(r.DeepCopy()),
		ca: csrtest.NewCA(t, "ca", now.Add(-time.Hour), now.Add(20*365*24*time.Hour))}
	loaded, err := loadCA(writeCA(t, t.TempDir(), f.ca.CertPEM, f.ca.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	f.c = &controller{client: f.client, ttl: defaultClusterSigningDuration,
		clock: testingclock.NewFakePassiveClock(now), signers: map[string]signer{},
		csrs: certlisters.NewCertificateSigningRequestLister(controllertest.ClusterIndexer(t, r))}
	for _, s := range signers {
		f.c.signers[s] = signer{ca: loaded, validate: validators[s]}
	}
	f.c.loop = workloop.New("test", f.c.sync, workloop.Options{})
	t.Cleanup(f.c.loop.ShutDown)
	f.client.ClearActions()
	return f
}

// written returns the status written, nil if none.
func (f *fixture) written(t *testing.T) *certv1.CertificateSigningRequestStatus {
	t.Helper()
	var out *certv1.CertificateSigningRequestStatus
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "update" || a.GetSubresource() != "status" {
			t.Errorf("unexpected %s %s/%s", a.GetVerb(), a.GetResource().Resource,
				a.GetSubresource())
			continue
		}
		obj := a.(k8stesting.UpdateAction).GetObject()
		out = &obj.(*certv1.CertificateSigningRequest).Status
	}
	return out
}

func approved(r *certv1.CertificateSigningRequest) *certv1.CertificateSigningRequest {
	return csrtest.With(r, certv1.CertificateApproved, now)
}

func TestSync(t *testing.T) {
	servingSubject := csrtest.Node("n1")
	servingSubject.DNSNames = []string{"n1.example"}
	servingUsages := []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}
	servingCSR := func() *certv1.CertificateSigningRequest {
		return csrtest.CSR("r", serving, "system:node:n1", csrtest.Request(t, servingSubject),
			servingUsages...)
	}
	clientCSR := func(usages ...certv1.KeyUsage) *certv1.CertificateSigningRequest {
		return csrtest.CSR("r", apiClient, "u", csrtest.Request(t, csrtest.Subject{
			CommonName: "alice"}), usages...)
	}
	issued := approved(servingCSR())
	issued.Status.Certificate = []byte("x")
	short := approved(clientCSR(certv1.UsageClientAuth))
	short.Spec.ExpirationSeconds = ptr.To[int32](3600)
	legacy := approved(csrtest.CSR("r", legacyUnknownSignerName, "u",
		csrtest.Request(t, csrtest.Subject{CommonName: "anything"}), certv1.UsageServerAuth))
	tests := []struct {
		name       string
		csr        *certv1.CertificateSigningRequest
		signers    []string
		wantCN     string        // the certificate's common name; "" none
		wantLength time.Duration // its validity
		wantFailed string        // the Failed condition's message; "" none
	}{
		{name: "kubelet serving", csr: approved(servingCSR()), signers: []string{serving},
			wantCN: "system:node:n1", wantLength: 8760 * time.Hour},
		{name: "kube-apiserver client, an hour asked", csr: short,
			signers: []string{apiClient}, wantCN: "alice", wantLength: time.Hour + 5*time.Minute},
		{name: "legacy unknown: anything goes", csr: legacy,
			signers: []string{legacyUnknownSignerName}, wantCN: "anything",
			wantLength: 8760 * time.Hour},
		{name: "refused by its signer: Failed",
			csr:        approved(clientCSR(certv1.UsageClientAuth, certv1.UsageServerAuth)),
			signers:    []string{apiClient},
			wantFailed: "invalid usage for client certificate: server auth"},
		{name: "kubelet client with the wrong organization: Failed",
			csr: approved(csrtest.CSR("r", kubelet, "u", csrtest.Request(t, csrtest.Subject{
				CommonName: "system:node:n1"}), certv1.UsageClientAuth)),
			signers: []string{kubelet}, wantFailed: "subject organization is not system:nodes"},
		{name: "pending", csr: servingCSR(), signers: []string{serving}},
		{name: "denied", csr: csrtest.With(servingCSR(), certv1.CertificateDenied, now),
			signers: []string{serving}},
		{name: "approved and denied",
			csr:     csrtest.With(approved(servingCSR()), certv1.CertificateDenied, now),
			signers: []string{serving}},
		{name: "failed", csr: csrtest.With(approved(servingCSR()), certv1.CertificateFailed, now),
			signers: []string{serving}},
		{name: "issued", csr: issued, signers: []string{serving}},
		{name: "a signer not run", csr: approved(servingCSR()), signers: []string{apiClient}},
		{name: "a custom signer",
			csr: approved(csrtest.CSR("r", "example.com/custom", "u",
				csrtest.Request(t, servingSubject))),
			signers: signerNames},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.csr, tt.signers...)
			if err := f.c.sync(controllertest.LogContext(t), "r"); err != nil {
				t.Fatal(err)
			}
			st := f.written(t)
			switch {
			case st == nil && (tt.wantCN != "" || tt.wantFailed != ""):
				t.Fatal("nothing written")
			case st != nil && tt.wantCN == "" && tt.wantFailed == "":
				t.Fatalf("wrote %+v, want nothing", st)
			case tt.wantCN != "":
				f.checkCertificate(t, st, tt.wantCN, tt.wantLength)
			case tt.wantFailed != "":
				n := len(tt.csr.Status.Conditions)
				if len(st.Conditions) != n+1 || len(st.Certificate) != 0 {
					t.Fatalf("wrote %+v, want one more condition and no certificate", st)
				}
				c := st.Conditions[n]
				if c.Type != certv1.CertificateFailed || c.Status != corev1.ConditionTrue ||
					c.Reason != "SignerValidationFailure" || c.Message != tt.wantFailed ||
					!c.LastUpdateTime.Time.Equal(now) {
					t.Errorf("condition %+v, want Failed/True/SignerValidationFailure %q at %v",
						c, tt.wantFailed, now)
				}
			}
		})
	}
}

// checkCertificate checks that st holds one certificate for cn, issued
// by the fixture's CA, valid for length from five minutes before now.
func (f *fixture) checkCertificate(t *testing.T, st *certv1.CertificateSigningRequestStatus,
	cn string, length time.Duration) {
	t.Helper()
	block, rest := pem.Decode(st.Certificate)
	if block == nil || block.Type != "CERTIFICATE" || len(rest) != 0 {
		t.Fatalf("certificate %q, want one PEM CERTIFICATE", st.Certificate)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckSignatureFrom(f.ca.Cert); err != nil {
		t.Error(err)
	}
	if cert.Subject.CommonName != cn || !cert.NotBefore.Equal(now.Add(-5*time.Minute)) ||
		cert.NotAfter.Sub(cert.NotBefore) != length {
		t.Errorf("certificate for %q valid %v to %v, want %q for %v from %v",
			cert.Subject.CommonName, cert.NotBefore, cert.NotAfter, cn, length,
			now.Add(-5*time.Minute))
	}
}

func TestSyncErrors(t *testing.T) {
	r := approved(csrtest.CSR("r", apiClient, "u",
		csrtest.Request(t, csrtest.Subject{CommonName: "alice"}), certv1.UsageClientAuth))
	t.Run("write fails: retried", func(t *testing.T) {
		f := newFixture(t, r, apiClient)
		f.client.PrependReactor("update", "certificatesigningrequests",
			func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("boom")
			})
		if err := f.c.sync(t.Context(), "r"); err == nil || workloop.IsPermanent(err) {
			t.Errorf("sync error %v, want a retried one", err)
		}
	})
	t.Run("CA expired: retried", func(t *testing.T) {
		f := newFixture(t, r, apiClient)
		f.c.clock = testingclock.NewFakePassiveClock(now.Add(30 * 365 * 24 * time.Hour))
		if err := f.c.sync(t.Context(), "r"); err == nil || workloop.IsPermanent(err) {
			t.Errorf("sync error %v, want a retried one", err)
		}
		if st := f.written(t); st != nil {
			t.Errorf("wrote %+v", st)
		}
	})
	t.Run("unparsable request: dropped", func(t *testing.T) {
		bad := approved(csrtest.CSR("r", apiClient, "u", []byte("junk"), certv1.UsageClientAuth))
		f := newFixture(t, bad, apiClient)
		if err := f.c.sync(t.Context(), "r"); !workloop.IsPermanent(err) {
			t.Errorf("sync error %v, want a permanent one", err)
		}
	})
	t.Run("gone", func(t *testing.T) {
		f := newFixture(t, r, apiClient)
		if err := f.c.sync(t.Context(), "other"); err != nil {
			t.Errorf("sync error %v", err)
		}
	})
}

func TestDuration(t *testing.T) {
	c := &controller{ttl: 24 * time.Hour}
	for _, tt := range []struct {
		asked *int32
		want  time.Duration
	}{
		{nil, 24 * time.Hour},
		{ptr.To[int32](3600), time.Hour},
		{ptr.To[int32](60), 10 * time.Minute},
		{ptr.To[int32](48 * 3600), 24 * time.Hour},
	} {
		if got := c.duration(tt.asked); got != tt.want {
			t.Errorf("duration(%v) = %v, want %v", ptr.Deref(tt.asked, -1), got, tt.want)
		}
	}
	// Below ten minutes of maximum, the ten-minute floor wins, as in KCM.
	c.ttl = 5 * time.Minute
	if got := c.duration(ptr.To[int32](60)); got != 10*time.Minute {
		t.Errorf("duration under a 5m maximum = %v, want 10m", got)
	}
}

func TestOnlySignableRequestsAreQueued(t *testing.T) {
	c := &controller{signers: map[string]signer{apiClient: {}}}
	r := func(signer string) *certv1.CertificateSigningRequest {
		return csrtest.CSR("r", signer, "u", nil)
	}
	issued := approved(r(apiClient))
	issued.Status.Certificate = []byte("x")
	for _, tt := range []struct {
		name string
		obj  any
		want bool
	}{
		{"approved", approved(r(apiClient)), true},
		{"pending", r(apiClient), false},
		{"another signer", approved(r(serving)), false},
		{"failed", csrtest.With(approved(r(apiClient)), certv1.CertificateFailed, now), false},
		{"issued", issued, false},
		{"not a CSR", &corev1.Pod{}, false},
	} {
		if got := c.signable(tt.obj); got != tt.want {
			t.Errorf("%s: signable = %v, want %v", tt.name, got, tt.want)
		}
	}
}
