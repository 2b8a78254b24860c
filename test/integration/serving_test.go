//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/serving"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// TestServingDelegatedAuth serves /metrics and /healthz through
// serving.Server against a real API server: TokenReview authenticates the
// static tokens, RBAC decides the SubjectAccessReviews.
func TestServingDelegatedAuth(t *testing.T) {
	env := sharedEnv(t)
	admin := clientset(t, env.Config())
	grantMetrics(t, admin, rbacUser)

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up 1\n") })
	port := freePort(t)
	s, err := serving.New(serving.Options{SecurePort: port}, mux, admin, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Listen(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	}
	defer stop()

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CertPEM()) {
		t.Fatal("CertPEM holds no certificate")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	base := "https://127.0.0.1:" + strconv.Itoa(port)

	token := func(user string) string {
		tok, err := env.Token(user)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, tc := range []struct {
		name, path, token string
		want              int
	}{
		{name: "health without credentials", path: "/healthz", want: http.StatusOK},
		{name: "metrics without credentials", path: "/metrics", want: http.StatusUnauthorized},
		{name: "metrics with an unknown token", path: "/metrics", token: "not-a-token", want: http.StatusUnauthorized},
		{name: "metrics as a user without the binding", path: "/metrics", token: token(nobody), want: http.StatusForbidden},
		{name: "metrics as a user bound to get /metrics", path: "/metrics", token: token(rbacUser), want: http.StatusOK},
		{name: "another path as that user", path: "/other", token: token(rbacUser), want: http.StatusForbidden},
		{name: "metrics as system:masters", path: "/metrics", token: token(testenv.AdminUser), want: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s = %d %q, want %d", tc.path, resp.StatusCode, body, tc.want)
			}
		})
	}

	stop()
	if _, err := client.Get(base + "/healthz"); err == nil {
		t.Error("still serving after Serve returned")
	}
}

// grantMetrics binds user to a ClusterRole allowing get on /metrics, and
// waits until the authorizer honours it, so that no denial gets cached.
func grantMetrics(t *testing.T, admin kubernetes.Interface, user string) {
	t.Helper()
	ctx := t.Context()
	name := "it-serving-metrics-reader"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the role: %v", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the binding: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  user,
		Groups:                []string{"system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}
	var last string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = got.Status.Reason
		return got.Status.Allowed, nil
	}); err != nil {
		t.Fatalf("the binding never took effect: %v (last: %s)", err, last)
	}
}
