//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
	"github.com/ctrlhost/ctrlhost/testenv"
)

const seenAnnotation = "ctrlhost.test/seen-by"

// annotator marks every ConfigMap in one namespace with the name of the
// controller that saw it: a small but real controller (informer, lister,
// DeepCopy before update, writes through its own client).
func annotator(namespace string) descriptor.Descriptor {
	return descriptor.New("annotator-controller", func(ctx context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		client, err := cc.ClientBuilder.Client(cc.Name)
		if err != nil {
			return nil, err
		}
		cms := cc.InformerFactory.Core().V1().ConfigMaps()
		keys := make(chan string, 100)
		if _, err := cms.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil && strings.HasPrefix(key, namespace+"/") {
					keys <- key
				}
			},
		}); err != nil {
			return nil, err
		}
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			if !cache.WaitForCacheSync(ctx.Done(), cms.Informer().HasSynced) {
				return nil
			}
			for {
				select {
				case <-ctx.Done():
					return nil
				case key := <-keys:
					ns, name, _ := cache.SplitMetaNamespaceKey(key)
					cm, err := cms.Lister().ConfigMaps(ns).Get(name)
					if err != nil {
						continue
					}
					cm = cm.DeepCopy()
					if cm.Annotations == nil {
						cm.Annotations = map[string]string{}
					}
					cm.Annotations[seenAnnotation] = cc.Name
					if _, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
						keys <- key // retry; a conflict resolves on the next read
					}
				}
			}
		}), nil
	})
}

// httpsGet fetches url trusting only certPEM, with a bearer token if one
// is given.
func httpsGet(t *testing.T, certPEM []byte, url, token string) (int, string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	c := http.Client{Timeout: 5 * time.Second, Transport: tr}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestManagerAgainstAPIServer runs a Manager with a real controller against
// kube-apiserver: the controller acts on objects, the health endpoints
// answer over HTTP, and the Manager stops within its shutdown timeout.
func TestManagerAgainstAPIServer(t *testing.T) {
	env := sharedEnv(t)
	cs := clientset(t, env.Config())
	ns := namespace(t, cs)

	m, err := manager.NewBuilder("it-controller-manager").
		WithRESTConfig(env.Config()).
		WithOptions(manager.Options{Serving: serving.Options{BindAddress: "127.0.0.1", SecurePort: freePort(t)}, ControllerShutdownTimeout: 5 * time.Second}).
		Register(annotator(ns)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	var base string
	httpGet := func(url string) (int, string) { return httpsGet(t, m.ServingCertificate(), url, "") }
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if a := m.ServingAddr(); a != nil {
			base = "https://" + a.String()
			return true, nil
		}
		return false, nil
	}); err != nil {
		t.Fatal("the manager never bound its serving address")
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, _ := httpGet(base + "/readyz")
		return code == http.StatusOK, nil
	}); err != nil {
		_, body := httpGet(base + "/readyz?verbose")
		t.Fatalf("/readyz never became 200:\n%s", body)
	}
	for path, want := range map[string]string{
		"/healthz?verbose":             "[+]annotator-controller ok",
		"/livez?verbose":               "[+]annotator-controller ok",
		"/readyz?verbose":              "[+]informer-sync ok",
		"/readyz/annotator-controller": "ok",
	} {
		if code, body := httpGet(base + path); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d\n%s\nwant it to contain %q", path, code, body, want)
		}
	}

	// /metrics needs credentials: none → 401, a user without RBAC → 403,
	// the admin (system:masters) → 200.
	adminToken, err := env.Token(testenv.AdminUser)
	if err != nil {
		t.Fatal(err)
	}
	nobodyToken, err := env.Token(nobody)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		code  int
	}{{"", http.StatusUnauthorized}, {nobodyToken, http.StatusForbidden}, {adminToken, http.StatusOK}} {
		code, body := httpsGet(t, m.ServingCertificate(), base+"/metrics", tc.token)
		if code != tc.code {
			t.Errorf("GET /metrics: %d, want %d\n%.300s", code, tc.code, body)
		}
		if code == http.StatusOK && !strings.Contains(body, `it_controller_manager_controller_running{controller="annotator-controller"} 1`) {
			t.Errorf("/metrics lacks the controller's running gauge:\n%.2000s", body)
		}
	}

	cm, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{})
		return err == nil && got.Annotations[seenAnnotation] == "annotator-controller", nil
	}); err != nil {
		t.Fatalf("the controller never annotated %s/%s", ns, cm.Name)
	}

	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		t.Logf("Run returned %v after cancel", time.Since(start))
	case <-time.After(m.Options().ControllerShutdownTimeout + 10*time.Second):
		t.Fatal("Run did not return within the shutdown timeout")
	}
	done <- nil // for the deferred receive
	if st, _ := m.Status("annotator-controller"); st.Phase != manager.PhaseStopped {
		t.Errorf("after Run: %+v", st)
	}
	c := http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // only probing that nothing listens
	if _, err := c.Get(base + "/healthz"); err == nil {
		t.Error("still serving after Run returned")
	}
}

// TestManagerServingPortTaken: a taken --secure-port is reported by Run
// before any controller starts.
func TestManagerServingPortTaken(t *testing.T) {
	env := sharedEnv(t)
	port := freePort(t)
	started := make(chan struct{}, 1)
	build := func() *manager.Manager {
		m, err := manager.NewBuilder("it-port").
			WithRESTConfig(env.Config()).
			WithOptions(manager.Options{Serving: serving.Options{SecurePort: port}}).
			Register(descriptor.New("x-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
				started <- struct{}{}
				return descriptor.ControllerFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
			})).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := build()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	<-started
	err := build().Run(t.Context())
	cancel()
	if firstErr := <-done; firstErr != nil {
		t.Errorf("first manager: %v", firstErr)
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("cannot listen on 127.0.0.1:%d", port)) {
		t.Fatalf("second Run = %v, want a listen error naming the port", err)
	}
	if len(started) != 0 {
		t.Error("the second manager built a controller although it could not serve")
	}
	if errors.Is(err, manager.ErrControllerFailed) {
		t.Error("a serving error is not a controller failure")
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
