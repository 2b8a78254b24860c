package serving

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// endpoints is the handler the tests serve: /healthz and /metrics, and
// 404 for everything else.
func endpoints() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(
		"/healthz",
		func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") },
	)
	mux.HandleFunc(
		"/metrics",
		func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metric 1\n") },
	)
	return mux
}

// freePort returns a port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// trustingClient is an HTTPS client whose only root is pemCerts.
func trustingClient(t *testing.T, pemCerts []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCerts) {
		t.Fatalf("no certificate in %q", pemCerts)
	}
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
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

// start serves s in the background (Server.Start) until the test ends, and
// returns the base URL and a func that stops serving and returns its error,
// failing if serving has not ended 10s after it was stopped.
func start(t *testing.T, s *Server) (string, func() error) {
	t.Helper()
	r, err := s.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var result error
	stop := func() error {
		once.Do(func() {
			done := make(chan error, 1)
			go func() { done <- r.Stop() }()
			select {
			case result = <-done:
			case <-time.After(10 * time.Second):
				result = errors.New("still serving 10s after Stop")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return "https://" + r.Addr().String(), stop
}

// writePair writes a generated certificate and key to files.
func writePair(t *testing.T, c servingCert) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	der, err := x509.MarshalPKCS8PrivateKey(c.tls.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, c.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func generate(t *testing.T) servingCert {
	t.Helper()
	c, err := selfSigned("127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestServe(t *testing.T) {
	fromFiles := generate(t)
	certFile, keyFile := writePair(t, fromFiles)
	for _, tc := range []struct {
		name     string
		opts     Options
		wantCert []byte // nil: any
	}{
		{name: "self-signed"},
		{name: "from files", opts: Options{SecurePort: DefaultSecurePort, CertFile: certFile, KeyFile: keyFile}, wantCert: fromFiles.pem},
		{name: "bound to all interfaces", opts: Options{SecurePort: DefaultSecurePort, BindAddress: "0.0.0.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			port := freePort(t)
			opts.SecurePort = port
			s, err := New(opts, endpoints(), newFakeAPI(), testr.New(t))
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantCert != nil && string(s.CertPEM()) != string(tc.wantCert) {
				t.Errorf("CertPEM() = %s, want the file's", s.CertPEM())
			}
			_, stop := start(t, s)
			base := "https://127.0.0.1:" + strconv.Itoa(port)
			c := trustingClient(t, s.CertPEM())
			for _, r := range []struct {
				path, token string
				want        int
			}{
				{"/healthz", "", http.StatusOK},
				{"/metrics", "", http.StatusUnauthorized},
				{"/metrics", bobToken, http.StatusForbidden},
				{"/metrics", aliceToken, http.StatusOK},
				{"/debug/pprof/", aliceToken, http.StatusNotFound}, // profiling is off by default
			} {
				if code, body := get(t, c, base+r.path, r.token); code != r.want {
					t.Errorf("GET %s with %q = %d %q, want %d", r.path, r.token, code, body, r.want)
				}
			}
			// localhost is in the certificate too.
			if code, _ := get(t, c, strings.Replace(base, "127.0.0.1", "localhost", 1)+"/healthz", ""); code != http.StatusOK {
				t.Errorf("GET via localhost = %d", code)
			}
			// A client that does not trust the certificate is refused.
			if _, err := (&http.Client{Timeout: 5 * time.Second}).Get(base + "/healthz"); err == nil ||
				!strings.Contains(err.Error(), "certificate") {
				t.Errorf("untrusting client: %v, want a certificate error", err)
			}
			if err := stop(); err != nil {
				t.Errorf("Serve: %v", err)
			}
			if _, err := c.Get(base + "/healthz"); err == nil {
				t.Error("still serving after Serve returned")
			}
		})
	}
}

func TestServeSelfSignedCertificate(t *testing.T) {
	s, err := New(
		Options{SecurePort: freePort(t), BindAddress: "10.1.2.3"},
		endpoints(),
		newFakeAPI(),
		testr.New(t),
	)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(s.CertPEM())
	if block == nil {
		t.Fatal("CertPEM has no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, ip := range cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	if strings.Join(cert.DNSNames, ",") != "localhost" ||
		strings.Join(ips, ",") != "127.0.0.1,::1,10.1.2.3" {
		t.Errorf("certificate for DNS %v, IPs %v", cert.DNSNames, ips)
	}
	if cert.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("key algorithm %v, want ECDSA", cert.PublicKeyAlgorithm)
	}
	if d := time.Until(cert.NotAfter); d < 364*24*time.Hour || d > 366*24*time.Hour {
		t.Errorf("certificate valid for %v more, want about a year", d)
	}
}

func TestNewCertificateErrors(t *testing.T) {
	one, other := generate(t), generate(t)
	certFile, keyFile := writePair(t, one)
	_, otherKey := writePair(t, other)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.crt")
	garbage := filepath.Join(dir, "garbage.crt")
	if err := os.WriteFile(garbage, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name            string
		cert, key       string
		want            []string
		wantErrNotExist bool
	}{
		{name: "missing cert", cert: missing, key: keyFile, want: []string{"--tls-cert-file", missing}, wantErrNotExist: true},
		{name: "unreadable key", cert: certFile, key: dir, want: []string{"--tls-private-key-file", dir, "is a directory"}},
		{name: "key of another cert", cert: certFile, key: otherKey,
			want: []string{"--tls-cert-file " + certFile, "--tls-private-key-file " + otherKey, "private key does not match public key"}},
		{name: "not a cert", cert: garbage, key: keyFile, want: []string{"--tls-cert-file " + garbage, "--tls-private-key-file"}},
		{name: "cert without key", cert: certFile, want: []string{"set both or neither"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(
				Options{SecurePort: freePort(t), CertFile: tc.cert, KeyFile: tc.key},
				endpoints(),
				newFakeAPI(),
				testr.New(t),
			)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.wantErrNotExist && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("error %v does not wrap os.ErrNotExist", err)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing-kubeconfig")
	for _, tc := range []struct {
		name    string
		opts    Options
		handler http.Handler
		client  kubernetes.Interface
		want    []string
	}{
		{name: "no client", opts: Options{SecurePort: DefaultSecurePort}, handler: endpoints(),
			want: []string{"--authentication-kubeconfig: not set and New was given no client"}},
		{name: "bad kubeconfig", opts: Options{SecurePort: DefaultSecurePort, AuthorizationKubeconfig: missing}, handler: endpoints(), client: newFakeAPI(),
			want: []string{"--authorization-kubeconfig: loading " + missing}},
		{name: "every problem at once", opts: Options{SecurePort: DefaultSecurePort, CertFile: missing, KeyFile: missing}, handler: endpoints(),
			want: []string{"--authentication-kubeconfig", "--tls-cert-file: reading " + missing}},
		{name: "nil handler and bad options", opts: Options{SecurePort: DefaultSecurePort, BindAddress: "nowhere"}, client: newFakeAPI(),
			want: []string{"handler is nil", "--bind-address"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts, tc.handler, tc.client, testr.New(t))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestListenPortInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	want := "--bind-address/--secure-port: cannot listen on 127.0.0.1:" + strconv.Itoa(port)

	s, err := New(Options{SecurePort: port}, endpoints(), newFakeAPI(), testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Listen(t.Context()); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Listen: %v, want an error containing %q", err, want)
	}
	// Serve binds by itself when Listen was not called, and fails alike.
	if err := s.Serve(t.Context()); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Serve: %v, want an error containing %q", err, want)
	}
}

func TestServerLifecycleErrors(t *testing.T) {
	s, err := New(Options{SecurePort: freePort(t)}, endpoints(), newFakeAPI(), testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Listen(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Listen(t.Context()); err == nil {
		t.Error("second Listen: no error")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Serve(t.Context()); err == nil || !strings.Contains(err.Error(), "after Close") {
		t.Errorf("Serve after Close: %v", err)
	}

	// Serve binds by itself, returns when its context is done, and
	// refuses a second call.
	s, err = New(Options{SecurePort: freePort(t)}, endpoints(), newFakeAPI(), testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Serve(ctx); err != nil {
		t.Errorf("Serve with a done context: %v", err)
	}
	if err := s.Serve(t.Context()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second Serve: %v", err)
	}
}

func TestServeShutdown(t *testing.T) {
	for _, tc := range []struct {
		name        string
		honoursCtx  bool
		timeout     time.Duration
		wantErrPart string
	}{
		{name: "in-flight request ends with its context", honoursCtx: true, timeout: 5 * time.Second},
		{name: "request ignoring its context is cut off", timeout: 200 * time.Millisecond, wantErrPart: "graceful shutdown within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started, release := make(chan struct{}), make(chan struct{})
			slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(started)
				if tc.honoursCtx {
					<-r.Context().Done()
				} else {
					<-release
				}
			})
			s, err := New(
				Options{SecurePort: freePort(t), DisableAuth: true, ShutdownTimeout: tc.timeout},
				slow,
				nil,
				testr.New(t),
			)
			if err != nil {
				t.Fatal(err)
			}
			base, stop := start(t, s)
			c := trustingClient(t, s.CertPEM())
			reqDone := make(chan struct{})
			go func() {
				defer close(reqDone)
				if resp, err := c.Get(base + "/slow"); err == nil {
					resp.Body.Close()
				}
			}()
			<-started
			err = stop()
			close(release)
			<-reqDone
			if tc.wantErrPart == "" && err != nil ||
				tc.wantErrPart != "" &&
					(err == nil || !strings.Contains(err.Error(), tc.wantErrPart)) {
				t.Errorf("Serve: %v, want error containing %q", err, tc.wantErrPart)
			}
		})
	}
}

func TestDisabled(t *testing.T) {
	s, err := New(Options{SecurePort: -1}, endpoints(), nil, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if addr, err := s.Listen(t.Context()); addr != nil || err != nil {
		t.Errorf("Listen = %v, %v; want nil, nil", addr, err)
	}
	if err := s.Serve(t.Context()); err != nil {
		t.Errorf("Serve: %v", err)
	}
	if s.CertPEM() != nil {
		t.Error("a certificate while disabled")
	}
	if w := do(s.Handler(), http.MethodGet, "/metrics", ""); w.Code != http.StatusNotFound {
		t.Errorf("Handler while disabled: %d, want 404", w.Code)
	}
}

func TestDisableAuth(t *testing.T) {
	s, err := New(
		Options{SecurePort: DefaultSecurePort, DisableAuth: true},
		endpoints(),
		nil,
		testr.New(t),
	)
	if err != nil {
		t.Fatal(err)
	}
	if w := do(s.Handler(), http.MethodGet, "/metrics", ""); w.Code != http.StatusOK {
		t.Errorf("GET /metrics without auth: %d, want 200", w.Code)
	}
}

func TestProfiling(t *testing.T) {
	for _, tc := range []struct {
		profiling   bool
		path, token string
		wantCode    int
		wantBody    string
	}{
		{profiling: false, path: "/debug/pprof/", token: aliceToken, wantCode: 404},
		{profiling: true, path: "/debug/pprof/", wantCode: 401},
		{profiling: true, path: "/debug/pprof/", token: bobToken, wantCode: 403},
		{profiling: true, path: "/debug/pprof/", token: aliceToken, wantCode: 200, wantBody: "goroutine"},
		{profiling: true, path: "/debug/pprof/goroutine?debug=1", token: aliceToken, wantCode: 200, wantBody: "goroutine profile:"},
		{profiling: true, path: "/debug/pprof/heap?gc=1", token: aliceToken, wantCode: 200},
		{profiling: true, path: "/debug/pprof/nope", token: aliceToken, wantCode: 404},
		{profiling: true, path: "/debug/pprof/cmdline", token: aliceToken, wantCode: 200, wantBody: os.Args[0]},
		{profiling: true, path: "/debug/pprof/profile?seconds=0.01", token: aliceToken, wantCode: 200},
		{profiling: true, path: "/debug/pprof/profile?seconds=x", token: aliceToken, wantCode: 400},
		{profiling: true, path: "/debug/pprof/trace?seconds=0.01", token: aliceToken, wantCode: 200},
		{profiling: true, path: "/debug/pprof/symbol", token: aliceToken, wantCode: 200, wantBody: "num_symbols: 1"},
		{profiling: true, path: "/metrics", token: aliceToken, wantCode: 200, wantBody: "metric 1"},
	} {
		t.Run(strconv.FormatBool(tc.profiling)+tc.path+tc.token, func(t *testing.T) {
			s, err := New(
				Options{SecurePort: DefaultSecurePort, Profiling: tc.profiling},
				endpoints(),
				newFakeAPI(),
				testr.New(t),
			)
			if err != nil {
				t.Fatal(err)
			}
			w := do(s.Handler(), http.MethodGet, tc.path, tc.token)
			if w.Code != tc.wantCode || !strings.Contains(w.Body.String(), tc.wantBody) {
				t.Errorf(
					"GET %s = %d %.200q, want %d containing %q",
					tc.path,
					w.Code,
					w.Body.String(),
					tc.wantCode,
					tc.wantBody,
				)
			}
		})
	}
}

// TestAuthKubeconfigs: the kubeconfig flags point the reviews at another
// API server than the client given to New.
func TestAuthKubeconfigs(t *testing.T) {
	var reviews []string
	apiserver := newTLSAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		reviews = append(reviews, r.URL.Path)
		body, _ := io.ReadAll(r.Body)
		obj, _, err := scheme.Codecs.UniversalDeserializer().
			Decode(body, nil, nil)
			// JSON or protobuf
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch o := obj.(type) {
		case *authenticationv1.TokenReview:
			o.Status = authenticationv1.TokenReviewStatus{Authenticated: o.Spec.Token == "kc-token",
				User: authenticationv1.UserInfo{Username: "kc-user"}}
		case *authorizationv1.SubjectAccessReview:
			o.Status.Allowed = o.Spec.User == "kc-user"
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(obj)
	})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+apiserver+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: reviewer}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The fake given to New would answer 401 to kc-token: it must not be used.
	s, err := New(
		Options{
			SecurePort:               DefaultSecurePort,
			AuthenticationKubeconfig: kubeconfig,
			AuthorizationKubeconfig:  kubeconfig,
			SkipLookup:               true,
		},
		endpoints(),
		newFakeAPI(),
		testr.New(t),
	)
	if err != nil {
		t.Fatal(err)
	}
	if w := do(s.Handler(), http.MethodGet, "/metrics", "kc-token"); w.Code != http.StatusOK {
		t.Errorf(
			"GET /metrics with the kubeconfig's user = %d %q, want 200",
			w.Code,
			w.Body.String(),
		)
	}
	if len(reviews) != 2 {
		t.Errorf(
			"reviews made through the kubeconfig: %v, want a TokenReview and a SubjectAccessReview",
			reviews,
		)
	}
}

// newTLSAPIServer serves h over HTTPS until the test ends, and returns its
// URL. Requests are handled one at a time by the test's own goroutine
// structure: the filter makes them sequentially.
func newTLSAPIServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	c := generate(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{c.tls}},
		ReadHeaderTimeout: 5 * time.Second,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.ServeTLS(ln, "", "")
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return "https://" + ln.Addr().String()
}

// messages is a logger that records every message it is given.
type messages struct {
	mu   sync.Mutex
	msgs []string
}

func (m *messages) logger() logr.Logger {
	return funcr.New(func(_, args string) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.msgs = append(m.msgs, args)
	}, funcr.Options{})
}

func (m *messages) count(substr string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.msgs {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}

const generatedMsg = "Generated a self-signed serving certificate"

func TestSelfSignedGeneratedAtListen(t *testing.T) {
	var log messages
	s, err := New(
		Options{SecurePort: PortEphemeral, DisableAuth: true},
		endpoints(),
		nil,
		log.logger(),
	)
	if err != nil {
		t.Fatal(err)
	}
	if n := log.count(generatedMsg); n != 0 {
		t.Fatalf(
			"New logged %q %d times; it must wait for Listen, since the program may still fail",
			generatedMsg,
			n,
		)
	}
	addr, err := s.Listen(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := log.count(generatedMsg); n != 1 {
		t.Errorf("after Listen, %q logged %d times, want once", generatedMsg, n)
	}
	if s.CertPEM() == nil {
		t.Error("no certificate after Listen")
	}
	if n := log.count(generatedMsg); n != 1 {
		t.Errorf("after CertPEM, %q logged %d times, want once", generatedMsg, n)
	}
	if port := addr.(*net.TCPAddr).Port; port == 0 {
		t.Errorf("PortEphemeral: Listen bound %v, want a kernel-picked port", addr)
	}
}

func TestSelfSignedNotGeneratedOnFailedNew(t *testing.T) {
	var log messages
	if _, err := New(Options{SecurePort: 70000}, endpoints(), nil, log.logger()); err == nil {
		t.Fatal("New accepted port 70000")
	}
	if n := log.count(generatedMsg); n != 0 {
		t.Errorf("failed New logged %q", generatedMsg)
	}
}

func TestEphemeralServes(t *testing.T) {
	s, err := New(
		Options{SecurePort: PortEphemeral, DisableAuth: true},
		endpoints(),
		nil,
		testr.New(t),
	)
	if err != nil {
		t.Fatal(err)
	}
	url, stop := start(t, s)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	resp, err := trustingClient(t, s.CertPEM()).Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz on the ephemeral port: %d, want 200", resp.StatusCode)
	}
}
