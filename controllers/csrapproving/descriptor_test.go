package csrapproving_test

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	certv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/controllers/csrapproving"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/csr/csrtest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	controllertest.CheckIdentity(t, csrapproving.Descriptor(csrapproving.NewOptions()),
		controllertest.Identity{
			Name: "certificatesigningrequest-approving-controller", Alias: "csrapproving"})
	o := csrapproving.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		csrapproving.Descriptor(csrapproving.NewOptions()))
}

// TestManagerApprovesKubeletClientRequests: under a Manager, a node's
// renewal is approved once its review allows it; a serving request is
// left alone.
func TestManagerApprovesKubeletClientRequests(t *testing.T) {
	usages := []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}
	renewal := csrtest.CSR("renewal", certv1.KubeAPIServerClientKubeletSignerName,
		"system:node:n1", csrtest.Request(t, csrtest.Node("n1")), usages...)
	serving := csrtest.CSR("serving", certv1.KubeletServingSignerName, "system:node:n1",
		csrtest.Request(t, csrtest.Node("n1")), usages...)
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{csrapproving.Descriptor(csrapproving.NewOptions())},
		renewal, serving)
	h.Client.PrependReactor("create", "subjectaccessreviews",
		func(a k8stesting.Action) (bool, runtime.Object, error) {
			sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
			sar.Status.Allowed = sar.Spec.ResourceAttributes.Subresource == "selfnodeclient"
			return true, sar, nil
		})
	h.Start()
	get := func(name string) *certv1.CertificateSigningRequest {
		r, err := h.Client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), name,
			metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	controllertest.WaitFor(t, "the renewal approved", func() bool {
		c := get("renewal").Status.Conditions
		return len(c) == 1 && c[0].Message == csrapproving.SelfNodeMessage
	})
	h.WaitHealthy("/readyz")
	if c := get("serving").Status.Conditions; len(c) != 0 {
		t.Errorf("the serving request has conditions %+v", c)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
