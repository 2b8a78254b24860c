package serviceaccount_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/serviceaccount"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	controllertest.CheckIdentity(
		t,
		serviceaccount.Descriptor(serviceaccount.NewOptions()),
		controllertest.Identity{
			Name: "serviceaccount-controller", Alias: "serviceaccount",
		},
	)
	o := serviceaccount.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       serviceaccount.Options
		wantErr []string
	}{
		{"defaults", serviceaccount.NewOptions(), nil},
		{"zero value", serviceaccount.Options{}, nil},
		{
			"negative workers",
			serviceaccount.Options{Workers: -1},
			[]string{"serviceaccount-controller", "Workers: must be at least 1, got -1"},
		},
		{
			"empty list",
			serviceaccount.Options{ServiceAccounts: []string{}},
			[]string{"ServiceAccounts: must not be empty"},
		},
		{
			"bad name",
			serviceaccount.Options{ServiceAccounts: []string{"Bad_Name"}},
			[]string{`ServiceAccounts: "Bad_Name" is not a valid name`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, serviceaccount.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

func TestManagerEnsuresDefault(t *testing.T) {
	ns := func(name string, phase corev1.NamespacePhase) *corev1.Namespace {
		return &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Status:     corev1.NamespaceStatus{Phase: phase},
		}
	}
	h := managertest.New(t, "test", []descriptor.Descriptor{serviceaccount.Descriptor(serviceaccount.NewOptions())},
		ns(
			"active",
			corev1.NamespaceActive,
		), ns("terminating", corev1.NamespaceTerminating)).
		Start()
	exists := func(ns string) func() bool {
		return func() bool {
			_, err := h.Client.CoreV1().
				ServiceAccounts(ns).
				Get(t.Context(), "default", metav1.GetOptions{})
			return err == nil
		}
	}
	controllertest.WaitFor(t, "default in the active namespace", exists("active"))

	if err := h.Client.CoreV1().ServiceAccounts("active").Delete(t.Context(), "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "default to be recreated", exists("active"))

	if _, err := h.Client.CoreV1().Namespaces().Create(t.Context(), ns("later", corev1.NamespaceActive), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "default in a new namespace", exists("later"))

	_, err := h.Client.CoreV1().
		ServiceAccounts("terminating").
		Get(t.Context(), "default", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("service account in a terminating namespace: %v", err)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRunWithCancelledContext: Run returns and releases the queue (its
// goroutines) even when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(
		t,
		serviceaccount.Descriptor(serviceaccount.NewOptions()),
	)
}
