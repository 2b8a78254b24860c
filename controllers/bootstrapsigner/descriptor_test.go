package bootstrapsigner_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cluster-bootstrap/token/jws"

	"github.com/ctrlhost/ctrlhost/controllers/bootstrapsigner"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	controllertest.CheckIdentity(t, bootstrapsigner.Descriptor(bootstrapsigner.NewOptions()),
		controllertest.Identity{Name: "bootstrap-signer-controller", Alias: "bootstrapsigner",
			DisabledByDefault: true})
	o := bootstrapsigner.NewOptions()
	if controllertest.FlagSet(o.AddFlags).HasFlags() {
		t.Error("AddFlags registered flags; KCM has none for this controller")
	}
	if o.ConfigMapNamespace != "kube-public" || o.ConfigMapName != "cluster-info" ||
		o.TokenSecretNamespace != "kube-system" {
		t.Errorf("NewOptions() = %+v, want KCM's kube-public/cluster-info and kube-system", o)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       bootstrapsigner.Options
		wantErr []string
	}{
		{"defaults", bootstrapsigner.NewOptions(), nil},
		{"zero value", bootstrapsigner.Options{}, nil},
		{"bad names", bootstrapsigner.Options{ConfigMapNamespace: "Kube_Public",
			ConfigMapName: "cluster info", TokenSecretNamespace: "kube.system"},
			[]string{`ConfigMapNamespace: "Kube_Public" is not a namespace name`,
				`ConfigMapName: "cluster info" is not a ConfigMap name`,
				`TokenSecretNamespace: "kube.system" is not a namespace name`,
				"leave it empty for the default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, bootstrapsigner.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t,
		bootstrapsigner.Descriptor(bootstrapsigner.NewOptions()))
}

func TestManagerDisabledByDefault(t *testing.T) {
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{bootstrapsigner.Descriptor(bootstrapsigner.NewOptions())}).Start()
	if st := h.WaitFor(bootstrapsigner.Name, manager.PhaseDisabled); st.Starts != 0 {
		t.Errorf("started %d times", st.Starts)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestManagerSignsClusterInfo: under a Manager, cluster-info is signed with
// the signing token, signed again when its kubeconfig changes, and loses
// the signature when the token goes.
func TestManagerSignsClusterInfo(t *testing.T) {
	const secret = "0123456789abcdef"
	tok := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-abcdef"},
		Type:       corev1.SecretTypeBootstrapToken,
		Data: map[string][]byte{"token-id": []byte("abcdef"), "token-secret": []byte(secret),
			"usage-bootstrap-signing": []byte("true")},
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "cluster-info"},
		Data:       map[string]string{"kubeconfig": "one"},
	}
	h := managertest.New(t, "test",
		[]descriptor.Descriptor{bootstrapsigner.Descriptor(bootstrapsigner.NewOptions())},
		tok, cm)
	h.Options.Controllers = []string{"*", bootstrapsigner.Alias}
	h.Start()
	get := func() *corev1.ConfigMap {
		c, err := h.Client.CoreV1().ConfigMaps("kube-public").Get(t.Context(), "cluster-info",
			metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	signed := func(content string) func() bool {
		return func() bool {
			c := get()
			return c.Data["kubeconfig"] == content && jws.DetachedTokenIsValid(
				c.Data["jws-kubeconfig-abcdef"], content, "abcdef", secret)
		}
	}
	controllertest.WaitFor(t, "cluster-info signed", signed("one"))

	c := get()
	c.Data["kubeconfig"] = "two"
	if _, err := h.Client.CoreV1().ConfigMaps("kube-public").Update(t.Context(), c,
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "the new kubeconfig signed", signed("two"))

	if err := h.Client.CoreV1().Secrets("kube-system").Delete(t.Context(), tok.Name,
		metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "the signature removed", func() bool {
		_, ok := get().Data["jws-kubeconfig-abcdef"]
		return !ok
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
