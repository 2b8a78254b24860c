//go:build unix

package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Write is one request that may change the cluster (POST, PUT, PATCH or
// DELETE), as a replica's witness saw it on its way to the API server.
type Write struct {
	Replica string
	// At is when the witness received it, before it went on.
	At     time.Time
	Method string
	Path   string
	// Code is the API server's answer; 0 if it never answered.
	Code      int
	UserAgent string
}

// Election reports whether w is a write a replica makes whether it leads
// or not: a write of Lease lease (LeaseWrite), or a review the API server
// is asked for the replica's own endpoints (TokenReview,
// SubjectAccessReview).
func (w Write) Election(lease string) bool {
	return w.LeaseWrite(lease) ||
		strings.HasPrefix(w.Path, "/apis/authentication.k8s.io/") ||
		strings.HasPrefix(w.Path, "/apis/authorization.k8s.io/")
}

// LeaseWrite reports whether w writes Lease lease of kube-system: its
// creation (a POST of a Lease there), an acquisition, renewal or release.
func (w Write) LeaseWrite(lease string) bool {
	const leases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
	return w.Path == leases && w.Method == http.MethodPost ||
		w.Path == leases+"/"+lease && w.Method != http.MethodPost
}

// witness is a replica's path to the API server: an HTTPS reverse proxy
// that records every write the replica sends. It passes each request on
// as the replica's own: a bearer token (a controller's ServiceAccount
// token) as it came, a client certificate's identity by impersonation (the
// witness presents the administrator's certificate, and the API server
// authorizes the certificate's user and groups).
type witness struct {
	replica string
	srv     *http.Server
	ln      net.Listener
	caPEM   []byte // the witness's own certificate, for the replica to trust
	done    chan struct{}

	record *[]Write // the cluster's log of every witness's writes
	logMu  *sync.Mutex

	countMu sync.Mutex
	counts  Requests // every request, not only writes
}

// Requests counts what a replica asked of the API server, as its witness
// saw it.
type Requests struct {
	// ByVerb counts requests by the verb the API server authorizes them
	// as: get, list, watch, create, update, patch, delete and
	// deletecollection; discovery and other paths outside the resource
	// API count as "nonresource".
	ByVerb map[string]int
	// Conflicts counts the answers 409 Conflict; Throttled the answers
	// 429 Too Many Requests.
	Conflicts, Throttled int
}

// Total is the number of requests counted.
func (r Requests) Total() int {
	n := 0
	for _, c := range r.ByVerb {
		n += c
	}
	return n
}

// newWitness starts a witness for replica in front of the API server of
// cfg (an administrator's config), appending what it sees to log under
// logMu as well as to its own.
func newWitness(replica string, cfg *rest.Config, log *[]Write, logMu *sync.Mutex) (
	*witness, error,
) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("cluster: witness: %w", err)
	}
	admin, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: witness: %w", err)
	}
	anonymous, err := rest.TransportFor(rest.AnonymousClientConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("cluster: witness: %w", err)
	}
	cert, caPEM, err := selfSigned()
	if err != nil {
		return nil, fmt.Errorf("cluster: witness: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cluster: witness: %w", err)
	}
	w := &witness{replica: replica, ln: ln, caPEM: caPEM, done: make(chan struct{}),
		record: log, logMu: logMu}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			for h := range r.Out.Header {
				if strings.HasPrefix(strings.ToLower(h), "impersonate-") {
					r.Out.Header.Del(h)
				}
			}
			if r.In.Header.Get("Authorization") != "" || r.In.TLS == nil ||
				len(r.In.TLS.PeerCertificates) == 0 {
				return
			}
			subject := r.In.TLS.PeerCertificates[0].Subject
			r.Out.Header.Set("Impersonate-User", subject.CommonName)
			for _, g := range subject.Organization {
				r.Out.Header.Add("Impersonate-Group", g)
			}
		},
		Transport: roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Header.Get("Impersonate-User") != "" {
				return admin.RoundTrip(req)
			}
			return anonymous.RoundTrip(req)
		}),
		FlushInterval: -1, // watches stream
	}
	w.srv = &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			// A watch is counted when it starts: it may last the whole run.
			w.countVerb(requestVerb(req.Method, req.URL))
			rec := &statusRecorder{ResponseWriter: rw}
			at := time.Now()
			proxy.ServeHTTP(rec, req)
			w.countCode(rec.code)
			if isWrite(req.Method) {
				w.add(Write{Replica: replica, At: at, Method: req.Method, Path: req.URL.Path,
					Code: rec.code, UserAgent: req.UserAgent()})
			}
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert},
			ClientAuth: tls.RequestClientCert, NextProtos: []string{"h2", "http/1.1"}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(w.done)
		_ = w.srv.ServeTLS(ln, "", "")
	}()
	return w, nil
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func (w *witness) add(wr Write) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	*w.record = append(*w.record, wr)
}

// countVerb counts one request by its verb.
func (w *witness) countVerb(verb string) {
	w.countMu.Lock()
	defer w.countMu.Unlock()
	if w.counts.ByVerb == nil {
		w.counts.ByVerb = map[string]int{}
	}
	w.counts.ByVerb[verb]++
}

// countCode counts the API server's answer to a request.
func (w *witness) countCode(code int) {
	w.countMu.Lock()
	defer w.countMu.Unlock()
	switch code {
	case http.StatusConflict:
		w.counts.Conflicts++
	case http.StatusTooManyRequests:
		w.counts.Throttled++
	}
}

// requests returns a copy of the counts so far.
func (w *witness) requests() Requests {
	w.countMu.Lock()
	defer w.countMu.Unlock()
	out := w.counts
	out.ByVerb = maps.Clone(w.counts.ByVerb)
	if out.ByVerb == nil {
		out.ByVerb = map[string]int{}
	}
	return out
}

// namespaceSubresources are what follows a Namespace's name in the path
// of a Namespace's own subresource, where a namespaced resource's name
// would otherwise be.
var namespaceSubresources = []string{"status", "finalize"}

// requestVerb returns the verb the API server authorizes a request as,
// from its method and URL, as its request-info parsing does: the resource
// API is /api/v1/... and /apis/<group>/<version>/...; a name after the
// resource makes a GET a get and a DELETE a delete, its absence a list
// and a deletecollection; watch=true (or the old /watch/ prefix) makes a
// GET a watch. Anything else is "nonresource".
func requestVerb(method string, u *url.URL) string {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return "nonresource"
	}
	watch := u.Query().Get("watch") == "true" || u.Query().Get("watch") == "1"
	if rest[0] == "watch" {
		watch, rest = true, rest[1:]
	}
	if len(rest) >= 3 && rest[0] == "namespaces" &&
		!slices.Contains(namespaceSubresources, rest[2]) {
		rest = rest[2:] // a namespaced resource
	}
	if len(rest) == 0 || rest[0] == "" {
		return "nonresource"
	}
	named := len(rest) >= 2
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch:
			return "watch"
		case named:
			return "get"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if named {
			return "delete"
		}
		return "deletecollection"
	}
	return strings.ToLower(method)
}

// url is the address the replica's kubeconfig names.
func (w *witness) url() string { return "https://" + w.ln.Addr().String() }

// close stops the witness, closing the connections it holds.
func (w *witness) close() error {
	err := w.srv.Close()
	<-w.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush lets a streamed answer through at once.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// selfSigned makes a serving certificate for 127.0.0.1, and its PEM for
// clients to trust.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "ctrlhost-cluster-witness"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}

// Overlaps returns the writes that show two replicas acting at once: in
// the order the witnesses received them, leaving out election writes of
// Lease lease (Write.Election), a replica that writes again after another
// replica wrote since its last write. A leader that gives way and later
// leads again shows up too; a test whose replicas lead at most once (each
// leader is stopped) reads any result as an overlap.
func Overlaps(writes []Write, lease string) []Write {
	var out []Write
	done := map[string]bool{} // replicas another has written after
	last := ""
	for _, w := range writes {
		if w.Election(lease) {
			continue
		}
		if w.Replica != last {
			if done[w.Replica] {
				out = append(out, w)
			}
			if last != "" {
				done[last] = true
			}
			last = w.Replica
		}
	}
	return out
}

// NotHolding returns the writes, election writes of Lease lease left out,
// that a replica sent while another replica was the last to write the
// Lease successfully (or before any did): writes of a replica that did
// not hold the Lease as far as the API server had seen.
func NotHolding(writes []Write, lease string) []Write {
	var out []Write
	holder := ""
	for _, w := range writes {
		switch {
		case w.LeaseWrite(lease):
			if w.Code/100 == 2 && w.Method != http.MethodDelete {
				holder = w.Replica
			}
		case w.Election(lease):
		case w.Replica != holder:
			out = append(out, w)
		}
	}
	return out
}
