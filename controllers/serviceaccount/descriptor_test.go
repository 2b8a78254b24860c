package serviceaccount_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/controllers/serviceaccount"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	d := serviceaccount.Descriptor(serviceaccount.NewOptions())
	if d.Name() != "serviceaccount-controller" {
		t.Errorf("name %q", d.Name())
	}
	if a := d.Aliases(); len(a) != 1 || a[0] != "serviceaccount" {
		t.Errorf("aliases %q, want [serviceaccount]", a)
	}
	if d.IsDisabledByDefault() {
		t.Error("disabled by default; KCM enables it")
	}
	o := serviceaccount.NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if fs.HasFlags() {
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
		{"negative workers", serviceaccount.Options{Workers: -1}, []string{"serviceaccount-controller", "Workers: must be at least 1, got -1"}},
		{"empty list", serviceaccount.Options{ServiceAccounts: []string{}}, []string{"ServiceAccounts: must not be empty"}},
		{"bad name", serviceaccount.Options{ServiceAccounts: []string{"Bad_Name"}}, []string{`ServiceAccounts: "Bad_Name" is not a valid name`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).Register(serviceaccount.Descriptor(tt.o)).Build()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Build succeeded")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// waitFor polls cond every 10ms for up to 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestManagerEnsuresDefault(t *testing.T) {
	ns := func(name string, phase corev1.NamespacePhase) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
	}
	h := managertest.New(t, "test", []descriptor.Descriptor{serviceaccount.Descriptor(serviceaccount.NewOptions())},
		ns("active", corev1.NamespaceActive), ns("terminating", corev1.NamespaceTerminating)).Start()
	exists := func(ns string) func() bool {
		return func() bool {
			_, err := h.Client.CoreV1().ServiceAccounts(ns).Get(t.Context(), "default", metav1.GetOptions{})
			return err == nil
		}
	}
	waitFor(t, "default in the active namespace", exists("active"))

	if err := h.Client.CoreV1().ServiceAccounts("active").Delete(t.Context(), "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "default to be recreated", exists("active"))

	if _, err := h.Client.CoreV1().Namespaces().Create(t.Context(), ns("later", corev1.NamespaceActive), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "default in a new namespace", exists("later"))

	_, err := h.Client.CoreV1().ServiceAccounts("terminating").Get(t.Context(), "default", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("service account in a terminating namespace: %v", err)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

type clients struct{ cs kubernetes.Interface }

func (c clients) Config(string) (*rest.Config, error) { return nil, errors.New("no config") }
func (c clients) Client(string) (kubernetes.Interface, error) {
	return c.cs, nil
}
func (c clients) MetadataClient(string) (metadata.Interface, error) {
	return nil, errors.New("no metadata client")
}

// TestRunWithCancelledContext: Run returns and releases the queue (its
// goroutines) even when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cs := fake.NewClientset()
	f := informers.NewSharedInformerFactory(cs, 0)
	c, err := serviceaccount.Descriptor(serviceaccount.NewOptions()).Init()(t.Context(), descriptor.Context{
		Name: serviceaccount.Name, ClientBuilder: clients{cs}, InformerFactory: f,
	})
	if err != nil || c == nil {
		t.Fatalf("Init = %v, %v", c, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
