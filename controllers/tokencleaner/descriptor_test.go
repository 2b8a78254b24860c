package tokencleaner_test

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

	"github.com/ctrlhost/ctrlhost/controllers/tokencleaner"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	d := tokencleaner.Descriptor(tokencleaner.NewOptions())
	if d.Name() != "token-cleaner-controller" {
		t.Errorf("name %q", d.Name())
	}
	if a := d.Aliases(); len(a) != 1 || a[0] != "tokencleaner" {
		t.Errorf("aliases %q, want [tokencleaner]", a)
	}
	if !d.IsDisabledByDefault() {
		t.Error("enabled by default; KCM disables it")
	}
	o := tokencleaner.NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if fs.HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       tokencleaner.Options
		wantErr string
	}{
		{"defaults", tokencleaner.NewOptions(), ""},
		{"zero value", tokencleaner.Options{}, ""},
		{"bad namespace", tokencleaner.Options{TokenSecretNamespace: "Kube_System"}, `token-cleaner-controller": TokenSecretNamespace: "Kube_System" is not a namespace name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).Register(tokencleaner.Descriptor(tt.o)).Build()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Build error %v, want %q", err, tt.wantErr)
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

func secret(ns, name string, typ corev1.SecretType, expiration time.Time) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       typ,
		Data:       map[string][]byte{tokencleaner.ExpirationKey: []byte(expiration.UTC().Format(time.RFC3339))},
	}
}

func TestManagerDeletesExpiredTokens(t *testing.T) {
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	h := managertest.New(t, "test", []descriptor.Descriptor{tokencleaner.Descriptor(tokencleaner.NewOptions())},
		secret("kube-system", "bootstrap-token-expird", corev1.SecretTypeBootstrapToken, past),
		secret("kube-system", "bootstrap-token-future", corev1.SecretTypeBootstrapToken, future),
		secret("kube-system", "opaque-expired", corev1.SecretTypeOpaque, past),
		secret("default", "bootstrap-token-elsewh", corev1.SecretTypeBootstrapToken, past),
	)
	h.Options.Controllers = []string{"*", "tokencleaner"}
	h.Start()
	gone := func(ns, name string) bool {
		_, err := h.Client.CoreV1().Secrets(ns).Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	waitFor(t, "the expired token to be deleted", func() bool { return gone("kube-system", "bootstrap-token-expird") })

	// A token created later, already expired, goes too.
	if _, err := h.Client.CoreV1().Secrets("kube-system").Create(t.Context(),
		secret("kube-system", "bootstrap-token-later0", corev1.SecretTypeBootstrapToken, past), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the later token to be deleted", func() bool { return gone("kube-system", "bootstrap-token-later0") })
	for _, s := range [][2]string{{"kube-system", "bootstrap-token-future"}, {"kube-system", "opaque-expired"}, {"default", "bootstrap-token-elsewh"}} {
		if gone(s[0], s[1]) {
			t.Errorf("%s/%s deleted", s[0], s[1])
		}
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestManagerDisabledByDefault(t *testing.T) {
	h := managertest.New(t, "test", []descriptor.Descriptor{tokencleaner.Descriptor(tokencleaner.NewOptions())}).Start()
	if st := h.WaitFor(tokencleaner.Name, manager.PhaseDisabled); st.Starts != 0 {
		t.Errorf("started %d times", st.Starts)
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
	c, err := tokencleaner.Descriptor(tokencleaner.NewOptions()).Init()(t.Context(), descriptor.Context{
		Name: tokencleaner.Name, ClientBuilder: clients{cs}, InformerFactory: informers.NewSharedInformerFactory(cs, 0),
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
