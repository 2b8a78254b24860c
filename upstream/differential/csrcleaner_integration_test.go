//go:build integration

package differential_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/controllers/csrcleaner"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// selfSigned returns a PEM certificate for cn valid until notAfter.
func selfSigned(t *testing.T, cn string, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestCSRCleaner: of requests decided, failed, issued or approved at
// times set in their conditions (the API server keeps a lastUpdateTime a
// client gives), the first pass deletes those past KCM's deadlines (an
// hour after a denial, a failure or an issued approval; a day after an
// approval without a certificate) and those whose certificate has
// expired; it keeps the others. (A pending request's age is its
// creationTimestamp, which the API server sets: no pending request here
// is old enough.)
func TestCSRCleaner(t *testing.T) {
	e := env(t)
	r := runner(t, e)
	upstreamAfterSync(&r, csrcleaner.Name, func(cc descriptor.Context) cache.SharedIndexInformer {
		return cc.InformerFactory.Certificates().V1().CertificateSigningRequests().Informer()
	})
	now := time.Now()
	valid := selfSigned(t, "valid", now.Add(24*time.Hour))
	ended := selfSigned(t, "ended", now.Add(-time.Hour))
	request := certRequest(t, subject{cn: "alice"})
	type step struct {
		t   certv1.RequestConditionType
		ago time.Duration
	}
	cases := []struct {
		name  string
		steps []step
		cert  []byte
	}{
		{name: "denied-old", steps: []step{{certv1.CertificateDenied, 2 * time.Hour}}},
		{name: "denied-new", steps: []step{{certv1.CertificateDenied, 0}}},
		{name: "failed-old", steps: []step{{certv1.CertificateFailed, 2 * time.Hour}}},
		{name: "failed-new", steps: []step{{certv1.CertificateFailed, 0}}},
		{name: "issued-old", steps: []step{{certv1.CertificateApproved, 2 * time.Hour}},
			cert: valid},
		{name: "issued-new", steps: []step{{certv1.CertificateApproved, 0}}, cert: valid},
		{name: "issued-expired", steps: []step{{certv1.CertificateApproved, 0}}, cert: ended},
		{name: "approved-stale", steps: []step{{certv1.CertificateApproved, 25 * time.Hour}}},
		{name: "approved-2h", steps: []step{{certv1.CertificateApproved, 2 * time.Hour}}},
		{name: "pending"},
	}
	start := time.Now()
	res, err := r.Run(t.Context(), differential.Scenario{
		Name:       "csr-cleaner deletes requests past their time",
		Controller: csrcleaner.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for _, c := range cases {
				obj, err := createCSR(ctx, cs, ns, csrCase{name: c.name,
					signer: certv1.KubeAPIServerClientSignerName, request: request,
					usages: []certv1.KeyUsage{certv1.UsageClientAuth}})
				if err != nil {
					return err
				}
				csrs := cs.CertificatesV1().CertificateSigningRequests()
				for _, s := range c.steps {
					obj.Status.Conditions = append(obj.Status.Conditions,
						certv1.CertificateSigningRequestCondition{Type: s.t, Status: "True",
							Reason:         "Differential",
							LastUpdateTime: metav1.NewTime(now.Add(-s.ago))})
					if s.t == certv1.CertificateFailed {
						obj, err = csrs.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
					} else {
						obj, err = csrs.UpdateApproval(ctx, obj.Name, obj, metav1.UpdateOptions{})
					}
					if err != nil {
						return err
					}
				}
				if c.cert != nil {
					obj.Status.Certificate = c.cert
					if _, err := csrs.UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
						return err
					}
				}
			}
			return nil
		},
		Observe: csrsOf(nil),
		Settled: func(state []map[string]any) bool {
			return count(state, "CertificateSigningRequest") == 5
		},
		Cleanup: cleanupCSRs,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("both sides settled in %v", time.Since(start).Round(time.Millisecond))
	if d := res.Diff(); d != "" {
		t.Errorf("native and upstream differ:\n%s", d)
	}
	var kept []string
	for _, o := range res.Native {
		kept = append(kept, nameOf(o))
	}
	want := []string{"<ns>-approved-2h", "<ns>-denied-new", "<ns>-failed-new",
		"<ns>-issued-new", "<ns>-pending"}
	if !slices.Equal(kept, want) {
		t.Errorf("native side kept %q, want %q", kept, want)
	}
}
