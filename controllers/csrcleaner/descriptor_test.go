package csrcleaner_test

import (
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/controllers/csrcleaner"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/csr/csrtest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	controllertest.CheckIdentity(t, csrcleaner.Descriptor(csrcleaner.NewOptions()),
		controllertest.Identity{
			Name: "certificatesigningrequest-cleaner-controller", Alias: "csrcleaner"})
	o := csrcleaner.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		csrcleaner.Descriptor(csrcleaner.NewOptions()))
}

// TestManagerDeletesExpiredRequests: under a Manager, the first pass
// deletes a request whose certificate has expired and keeps one whose
// certificate is valid.
func TestManagerDeletesExpiredRequests(t *testing.T) {
	now := time.Now()
	ca := csrtest.NewCA(t, "ca", now.Add(-48*time.Hour), now.Add(48*time.Hour))
	issued := func(name string, notAfter time.Time) *certv1.CertificateSigningRequest {
		r := csrtest.With(csrtest.CSR(name, certv1.KubeAPIServerClientSignerName, "u", nil),
			certv1.CertificateApproved, now)
		r.CreationTimestamp = metav1.NewTime(now)
		r.Status.Certificate = ca.Issue(t, name, now.Add(-24*time.Hour), notAfter)
		return r
	}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{csrcleaner.Descriptor(csrcleaner.NewOptions())},
		issued("expired", now.Add(-time.Minute)), issued("valid", now.Add(time.Hour))).Start()
	gone := func(name string) bool {
		_, err := h.Client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), name,
			metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	controllertest.WaitFor(t, "the expired request deleted", func() bool { return gone("expired") })
	if gone("valid") {
		t.Error("the valid request was deleted")
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
