package satoken_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/internal/satoken"
)

// TestForSendsTheServiceAccountsToken: a config made by For sends the
// minted token and not the host's credentials, keeps the host's user
// agent, and minting creates the ServiceAccount in the namespace given.
func TestForSendsTheServiceAccountsToken(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization") + " " + r.UserAgent()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37"}`))
	}))
	defer srv.Close()
	cs := fake.NewClientset()
	tokenReactor(cs, 0)
	creds := &satoken.Credentials{Namespace: "kube-system", Client: cs}
	host := &rest.Config{Host: srv.URL, BearerToken: "host-token", UserAgent: "kcm/job-controller"}
	cfg := creds.For(context.Background(), host, "job-controller", nil)

	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
	if sent := <-got; sent != "Bearer tok kcm/job-controller" {
		t.Errorf("sent %q, want the minted token and the host's user agent", sent)
	}
	if host.BearerToken != "host-token" {
		t.Error("For changed the host's config")
	}
	if _, err := cs.CoreV1().ServiceAccounts("kube-system").Get(context.Background(),
		"job-controller", metav1.GetOptions{}); err != nil {
		t.Errorf("the controller's ServiceAccount was not created: %v", err)
	}
}
