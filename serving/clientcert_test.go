package serving

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

// testCA signs client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{
		cert: cert,
		key:  key,
		pem:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}
}

// client returns a client certificate for cn and orgs with the given usage.
func (ca *testCA) client(
	t *testing.T,
	cn string,
	usage x509.ExtKeyUsage,
	orgs ...string,
) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(
			time.Now().UnixNano(),
		), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ca *testCA) file(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(p, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// whoami answers with the user the filter found, and fails if a
// credential or a front-proxy header reached it.
var whoami = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	for _, h := range []string{"Authorization", "X-Remote-User", "X-Remote-Group", "X-Remote-Extra-Scopes"} {
		if r.Header.Get(h) != "" {
			http.Error(w, h+" reached the handler", http.StatusInternalServerError)
			return
		}
	}
	u, _ := UserFrom(r.Context())
	_, _ = io.WriteString(
		w,
		"user="+u.Username+" groups="+strings.Join(
			u.Groups,
			",",
		)+" extra="+strings.Join(
			u.Extra["scopes"],
			",",
		),
	)
})

// serve runs a Server with opts on a free port until the test ends and
// returns its base URL.
func serve(t *testing.T, opts Options, api *fakeAPI) string {
	t.Helper()
	opts.SecurePort = PortEphemeral
	s, err := New(opts, whoami, api, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	addr, err := s.Listen(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return "https://" + addr.String()
}

func getWithCert(
	t *testing.T,
	url string,
	cert *tls.Certificate,
	headers map[string]string,
) (int, string) {
	t.Helper()
	cfg := &tls.Config{
		InsecureSkipVerify: true,
	} // the server's certificate is self-signed; not under test
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestClientCertificateAuthentication: with --client-ca-file, a client
// certificate the CA signed for client use authenticates as its common
// name with its organizations as groups; any other certificate does not.
func TestClientCertificateAuthentication(t *testing.T) {
	ca, other := newTestCA(t, "client-ca"), newTestCA(t, "other-ca")
	url := serve(t, Options{ClientCAFile: ca.file(t), SkipLookup: true}, newFakeAPI())
	alice := ca.client(t, "alice", x509.ExtKeyUsageClientAuth, "team-a")
	admin := ca.client(t, "admin", x509.ExtKeyUsageClientAuth, "system:masters")
	forged := other.client(t, "alice", x509.ExtKeyUsageClientAuth)
	serverUse := ca.client(t, "alice", x509.ExtKeyUsageServerAuth)
	for _, tc := range []struct {
		name     string
		cert     *tls.Certificate
		path     string
		wantCode int
		wantBody string
	}{
		{"signed, authorized by a SubjectAccessReview", &alice, "/metrics", 200, "user=alice groups=team-a"},
		{"signed, not authorized", &alice, "/other", 403, "Forbidden"},
		{"signed, always-allowed group", &admin, "/other", 200, "user=admin groups=system:masters"},
		{"another CA", &forged, "/metrics", 401, "Unauthorized"},
		{"not for client use", &serverUse, "/metrics", 401, "Unauthorized"},
		{"no certificate", nil, "/metrics", 401, "Unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := getWithCert(t, url+tc.path, tc.cert, nil)
			if code != tc.wantCode || !strings.HasPrefix(body, tc.wantBody) {
				t.Errorf(
					"GET %s = %d %q, want %d %q",
					tc.path,
					code,
					body,
					tc.wantCode,
					tc.wantBody,
				)
			}
		})
	}
}

// TestFrontProxyAuthentication: with --requestheader-client-ca-file, only a
// proxy certificate the front-proxy CA signed, with an allowed name, may
// assert the user in headers; the headers never reach the handler.
func TestFrontProxyAuthentication(t *testing.T) {
	proxyCA, clientCA := newTestCA(t, "front-proxy-ca"), newTestCA(t, "client-ca")
	url := serve(t, Options{
		ClientCAFile: clientCA.file(t),
		RequestHeader: RequestHeaderOptions{
			ClientCAFile: proxyCA.file(t),
			AllowedNames: []string{"front-proxy-client"},
		},
		SkipLookup: true,
	}, newFakeAPI())
	proxy := proxyCA.client(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)
	stranger := proxyCA.client(t, "someone-else", x509.ExtKeyUsageClientAuth)
	bob := clientCA.client(t, "bob", x509.ExtKeyUsageClientAuth, "system:masters")
	asserted := map[string]string{
		"X-Remote-User":         "alice",
		"X-Remote-Group":        "team-a",
		"X-Remote-Extra-Scopes": "s1",
	}
	for _, tc := range []struct {
		name     string
		cert     *tls.Certificate
		path     string
		wantCode int
		wantBody string
	}{
		{"allowed proxy asserts alice", &proxy, "/metrics", 200, "user=alice groups=team-a extra=s1"},
		{"proxy name not allowed", &stranger, "/metrics", 401, "Unauthorized"},
		{"client certificate cannot assert a user", &bob, "/other", 200, "user=bob groups=system:masters"},
		{"no certificate, headers only", nil, "/metrics", 401, "Unauthorized"},
		{"always-allowed path: headers stripped", nil, "/healthz", 200, "user= "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := getWithCert(t, url+tc.path, tc.cert, asserted)
			if code != tc.wantCode || !strings.HasPrefix(body, tc.wantBody) {
				t.Errorf(
					"GET %s = %d %q, want %d %q",
					tc.path,
					code,
					body,
					tc.wantCode,
					tc.wantBody,
				)
			}
		})
	}
}

// TestLookupFromTheCluster: without CA files, the client CA and the
// front-proxy settings come from kube-system/extension-apiserver-authentication;
// the lookup happens when the Server binds (Listen), not when it is built;
// a failed lookup is an error naming the fix, or a warning when tolerated;
// a missing ConfigMap configures nothing.
func TestLookupFromTheCluster(t *testing.T) {
	clientCA, proxyCA := newTestCA(t, "client-ca"), newTestCA(t, "front-proxy-ca")
	api := newFakeAPI()
	if _, err := api.CoreV1().ConfigMaps("kube-system").Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "extension-apiserver-authentication", Namespace: "kube-system"},
		Data: map[string]string{
			"client-ca-file":                     string(clientCA.pem),
			"requestheader-client-ca-file":       string(proxyCA.pem),
			"requestheader-allowed-names":        `["front-proxy-client"]`,
			"requestheader-username-headers":     `["X-Remote-User"]`,
			"requestheader-group-headers":        `["X-Remote-Group"]`,
			"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	url := serve(t, Options{}, api)
	alice := clientCA.client(t, "alice", x509.ExtKeyUsageClientAuth)
	if code, body := getWithCert(t, url+"/metrics", &alice, nil); code != 200 ||
		body != "user=alice groups= extra=" {
		t.Errorf("client certificate from the looked-up CA: %d %q", code, body)
	}
	proxy := proxyCA.client(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)
	if code, body := getWithCert(t, url+"/metrics", &proxy, map[string]string{"X-Remote-User": "alice"}); code != 200 ||
		!strings.HasPrefix(body, "user=alice") {
		t.Errorf("front proxy from the looked-up settings: %d %q", code, body)
	}

	// Forbidden: an error naming the RBAC fix and the flags, unless tolerated.
	denied := newFakeAPI()
	denied.PrependReactor(
		"get",
		"configmaps",
		func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(
				schema.GroupResource{Resource: "configmaps"},
				"extension-apiserver-authentication",
				errors.New("no RBAC"),
			)
		},
	)
	start := func(opts Options, api *fakeAPI) error {
		opts.SecurePort = PortEphemeral
		s, err := New(opts, whoami, api, testr.New(t))
		if err != nil {
			return err
		}
		defer s.Close()
		_, err = s.Listen(t.Context())
		return err
	}
	err := start(Options{}, denied)
	for _, want := range []string{"extension-apiserver-authentication-reader", "--authentication-tolerate-lookup-failure", "--client-ca-file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Listen with a forbidden lookup: %v; want an error mentioning %q", err, want)
		}
	}
	if err := start(Options{TolerateLookupFailure: true}, denied); err != nil {
		t.Errorf("Listen with a forbidden lookup, tolerated: %v", err)
	}
	if err := start(Options{SkipLookup: true}, denied); err != nil {
		t.Errorf("Listen with the lookup skipped: %v", err)
	}
	if err := start(Options{}, newFakeAPI()); err != nil {
		t.Errorf("Listen without the ConfigMap: %v", err)
	}
}

// TestTLSAndCertificateOptions: bad values are errors naming the flag and
// the fix; --tls-min-version is enforced; --cert-dir keeps one pair across
// restarts, its key private.
func TestTLSAndCertificateOptions(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{TLSMinVersion: "VersionTLS11"}, "--tls-min-version: VersionTLS11 is below TLS 1.2"},
		{Options{TLSMinVersion: "TLS9"}, "--tls-min-version: unknown TLS version"},
		{Options{TLSCipherSuites: []string{"TLS_NOPE"}}, `--tls-cipher-suites: unknown cipher suite "TLS_NOPE"`},
		{Options{ClientCAFile: "/does/not/exist.crt"}, "--client-ca-file: reading /does/not/exist.crt"},
		{Options{RequestHeader: RequestHeaderOptions{ClientCAFile: "/no/fp.crt"}}, "--requestheader-client-ca-file: reading /no/fp.crt"},
		{Options{CertFile: "a", KeyFile: "b", CertDir: "c"}, "--cert-dir is ignored when --tls-cert-file is set"},
	} {
		tc.opts.SecurePort, tc.opts.SkipLookup = PortEphemeral, true
		if _, err := New(tc.opts, whoami, newFakeAPI(), testr.New(t)); err == nil ||
			!strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.opts, err, tc.want)
		}
	}

	url := serve(t, Options{TLSMinVersion: "VersionTLS13", SkipLookup: true}, newFakeAPI())
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12},
	}
	defer tr.CloseIdleConnections()
	if resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("a TLS 1.2 client was served although --tls-min-version=VersionTLS13")
	}

	dir := t.TempDir()
	var pems [2][]byte
	for i := range pems {
		s, err := New(
			Options{
				SecurePort: PortEphemeral,
				CertDir:    dir,
				PairName:   "kube-controller-manager",
				SkipLookup: true,
			},
			whoami,
			newFakeAPI(),
			testr.New(t),
		)
		if err != nil {
			t.Fatal(err)
		}
		pems[i] = s.CertPEM()
	}
	if string(pems[0]) != string(pems[1]) || len(pems[0]) == 0 {
		t.Error("a second start with the same --cert-dir made a new certificate")
	}
	st, err := os.Stat(filepath.Join(dir, "kube-controller-manager.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the key in --cert-dir: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
}
