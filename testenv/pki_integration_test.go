//go:build integration

package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestPKIFiles: a client-certificate kubeconfig authenticates as its user;
// the API server publishes the front-proxy CA it was given; the key files
// are private.
func TestPKIFiles(t *testing.T) {
	ctx := context.Background()
	e, err := Start(ctx, Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	conf := filepath.Join(t.TempDir(), "controller-manager.conf")
	if err := e.WriteClientCertKubeconfig(conf, "system:kube-controller-manager", "g1"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", conf)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := review.Status.UserInfo; u.Username != "system:kube-controller-manager" || !strings.Contains(strings.Join(u.Groups, ","), "g1") {
		t.Errorf("authenticated as %q %v", u.Username, u.Groups)
	}

	pki := e.PKI()
	admin, err := kubernetes.NewForConfig(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	cm, err := admin.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fpca, err := os.ReadFile(pki.FrontProxyCAFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(cm.Data["requestheader-client-ca-file"]) != strings.TrimSpace(string(fpca)) {
		t.Error("the API server publishes another front-proxy CA than FrontProxyCAFile")
	}
	if !strings.Contains(cm.Data["requestheader-allowed-names"], FrontProxyClientName) {
		t.Errorf("requestheader-allowed-names = %q", cm.Data["requestheader-allowed-names"])
	}
	for _, key := range []string{pki.CAKeyFile, pki.FrontProxyClientKeyFile, pki.ServiceAccountKeyFile} {
		st, err := os.Stat(key)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", key, err, st.Mode().Perm())
		}
	}
}
