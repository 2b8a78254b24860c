package vapstatus_test

import (
	"strings"
	"testing"

	arv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/vapstatus"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	d := vapstatus.Descriptor(vapstatus.NewOptions())
	if d.Name() != "validatingadmissionpolicy-status-controller" {
		t.Errorf("name %q, want KCM's", d.Name())
	}
	if a := d.Aliases(); len(a) != 0 {
		t.Errorf("aliases %q; KCM has none", a)
	}
	if d.IsDisabledByDefault() || len(d.FeatureGates()) != 0 {
		t.Error("KCM runs it by default, under no feature gate")
	}
	if d.EventSource() != d.Name() {
		t.Errorf("event source %q", d.EventSource())
	}
	if got := d.Informers(); len(got) != 1 || got[0].Resource != "validatingadmissionpolicies" {
		t.Errorf("informers %v, want the policies'", got)
	}
}

func TestFlags(t *testing.T) {
	o := vapstatus.NewOptions()
	f := controllertest.ParseFlag(t, o.AddFlags,
		"concurrent-validating-admission-policy-status-syncs",
		"--concurrent-validating-admission-policy-status-syncs=7")
	if f.DefValue != "5" || o.ConcurrentPolicySyncs != 7 {
		t.Errorf("default %s, parsed %d; want KCM's 5, then 7", f.DefValue, o.ConcurrentPolicySyncs)
	}
	controllertest.CheckBuild(t, vapstatus.Descriptor(vapstatus.Options{}))
	controllertest.CheckBuild(t, vapstatus.Descriptor(vapstatus.Options{ConcurrentPolicySyncs: -1}),
		"--concurrent-validating-admission-policy-status-syncs", "got -1")
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, vapstatus.Descriptor(vapstatus.NewOptions()))
}

// TestManagerWritesStatus: under a Manager, a policy gets the status of
// its generation. It matches no resource, so nothing needs the API
// server's OpenAPI (which a fake clientset lacks).
func TestManagerWritesStatus(t *testing.T) {
	p := &arv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1},
		Spec: arv1.ValidatingAdmissionPolicySpec{
			Validations: []arv1.Validation{{Expression: "object.x == 1"}}},
	}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{vapstatus.Descriptor(vapstatus.NewOptions())}, p).Start()
	managertest.Eventually(t, "the status written", func() bool {
		got, err := h.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(
			t.Context(), "p", metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == 1 &&
			got.Status.TypeChecking != nil && len(got.Status.TypeChecking.ExpressionWarnings) == 0
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestInitWithoutARESTMapper(t *testing.T) {
	_, err := vapstatus.Descriptor(vapstatus.NewOptions()).Init()(t.Context(),
		descriptor.Context{Name: vapstatus.Name})
	if err == nil || !strings.Contains(err.Error(), "RESTMapper") {
		t.Errorf("Init without a REST mapper = %v, want an error naming it", err)
	}
}
