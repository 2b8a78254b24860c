package tokencleaner_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/tokencleaner"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	controllertest.CheckIdentity(
		t,
		tokencleaner.Descriptor(tokencleaner.NewOptions()),
		controllertest.Identity{
			Name: "token-cleaner-controller", Alias: "tokencleaner", DisabledByDefault: true,
		},
	)
	o := tokencleaner.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       tokencleaner.Options
		wantErr []string
	}{
		{"defaults", tokencleaner.NewOptions(), nil},
		{"zero value", tokencleaner.Options{}, nil},
		{
			"bad namespace",
			tokencleaner.Options{TokenSecretNamespace: "Kube_System"},
			[]string{
				`token-cleaner-controller": TokenSecretNamespace: "Kube_System" is not a namespace name`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, tokencleaner.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

func secret(ns, name string, typ corev1.SecretType, expiration time.Time) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       typ,
		Data: map[string][]byte{
			tokencleaner.ExpirationKey: []byte(expiration.UTC().Format(time.RFC3339)),
		},
	}
}

func TestManagerDeletesExpiredTokens(t *testing.T) {
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	h := managertest.New(
		t,
		"test",
		[]descriptor.Descriptor{tokencleaner.Descriptor(tokencleaner.NewOptions())},
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
	controllertest.WaitFor(
		t,
		"the expired token to be deleted",
		func() bool { return gone("kube-system", "bootstrap-token-expird") },
	)

	// A token created later, already expired, goes too.
	if _, err := h.Client.CoreV1().Secrets("kube-system").Create(t.Context(),
		secret("kube-system", "bootstrap-token-later0", corev1.SecretTypeBootstrapToken, past), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(
		t,
		"the later token to be deleted",
		func() bool { return gone("kube-system", "bootstrap-token-later0") },
	)
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
	h := managertest.New(t, "test", []descriptor.Descriptor{tokencleaner.Descriptor(tokencleaner.NewOptions())}).
		Start()
	if st := h.WaitFor(tokencleaner.Name, manager.PhaseDisabled); st.Starts != 0 {
		t.Errorf("started %d times", st.Starts)
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
		tokencleaner.Descriptor(tokencleaner.NewOptions()),
	)
}
