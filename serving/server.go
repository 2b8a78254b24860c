package serving

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Server serves a handler over HTTPS behind an AuthFilter. Build one with
// New, bind it with Listen, run it with Serve.
type Server struct {
	opts    Options
	log     logr.Logger
	handler http.Handler
	cert    servingCert // zero when serving is disabled, or until a self-signed one is generated
	tls     *tls.Config // without certificates
	filter  *AuthFilter // nil without auth
	// reads the cluster's authentication ConfigMap at Listen; nil: no lookup
	lookup kubernetes.Interface

	mu     sync.Mutex
	ln     net.Listener
	served bool // Serve was called
	closed bool // Close was called
}

// New validates opts and prepares a Server: it loads the certificate and
// key, and builds the authentication and authorization filter around
// handler, with profiling when asked for. It starts no goroutine, binds
// nothing, and generates no key: without --tls-cert-file, the self-signed
// certificate is generated (and logged) by the first Listen, Serve or
// CertPEM, so a program whose setup fails after New never makes one.
//
// client creates the TokenReviews and SubjectAccessReviews unless
// AuthenticationKubeconfig / AuthorizationKubeconfig name other
// credentials; it may be nil when both are set or DisableAuth is. When
// serving is disabled (SecurePort is PortDisabled), New only validates opts, as
// KCM loads neither certificates nor auth kubeconfigs then: Listen and
// Serve do nothing and Handler answers 404 to everything.
func New(
	opts Options,
	handler http.Handler,
	client kubernetes.Interface,
	log logr.Logger,
) (*Server, error) {
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	opts = opts.WithDefaults()
	errs := opts.Validate()
	if handler == nil {
		errs = append(errs, errors.New("serving: handler is nil"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s := &Server{opts: opts, log: log, tls: &tls.Config{MinVersion: tls.VersionTLS12}}
	if v, err := tlsVersion(opts.TLSMinVersion); err == nil {
		s.tls.MinVersion = v
	}
	s.tls.CipherSuites, _ = cipherSuites(opts.TLSCipherSuites) // validated above
	if !opts.Enabled() {
		// As KCM: no certificate, no delegated auth, nothing to fail on.
		log.Info(
			"Serving is disabled: SecurePort is serving.PortDisabled (on the command line, --secure-port=0)",
		)
		s.handler = http.NotFoundHandler()
		return s, nil
	}

	var inner http.Handler = handler
	if opts.Profiling {
		inner = withProfiling(handler)
	}
	s.handler = inner
	if opts.DisableAuth {
		log.Info(
			"Serving WITHOUT authentication or authorization: every endpoint is open "+
				"to anyone who can connect",
			"flag",
			"--disable-serving-auth",
		)
	} else {
		filter, authn, err := newFilter(opts, client, log)
		if err != nil {
			errs = append(errs, err)
		} else {
			s.handler, s.filter = filter.Wrap(inner), filter
			if !opts.SkipLookup && (filter.cfg.ClientCAs == nil || filter.cfg.RequestHeader == nil) {
				s.lookup = authn
			}
		}
	}

	var err error
	if opts.CertFile != "" {
		s.cert, err = loadCert(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, errors.Join(append(errs, err)...)
		}
		if leaf := s.cert.tls.Leaf; leaf != nil && time.Now().After(leaf.NotAfter) {
			log.Info(
				"WARNING: the serving certificate has expired",
				"file",
				opts.CertFile,
				"notAfter",
				leaf.NotAfter,
			)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// lookupTimeout bounds the read of the cluster's authentication ConfigMap.
const lookupTimeout = 10 * time.Second

// newFilter builds the AuthFilter of opts, with clients from the
// kubeconfig flags or client, and the CA files; it also returns the
// authentication client, for the cluster lookup.
func newFilter(
	opts Options,
	client kubernetes.Interface,
	log logr.Logger,
) (*AuthFilter, kubernetes.Interface, error) {
	authn, err := reviewClient(client, opts.AuthenticationKubeconfig, "--authentication-kubeconfig")
	if err != nil {
		return nil, nil, err
	}
	authz, err := reviewClient(client, opts.AuthorizationKubeconfig, "--authorization-kubeconfig")
	if err != nil {
		return nil, nil, err
	}
	var clientCAs *x509.CertPool
	var rh *RequestHeaderConfig
	if opts.ClientCAFile != "" {
		if clientCAs, err = readCAs("--client-ca-file", opts.ClientCAFile); err != nil {
			return nil, nil, err
		}
	}
	if r := opts.RequestHeader; r.ClientCAFile != "" {
		pool, err := readCAs("--requestheader-client-ca-file", r.ClientCAFile)
		if err != nil {
			return nil, nil, err
		}
		rh = &RequestHeaderConfig{
			CAs:                 pool,
			AllowedNames:        r.AllowedNames,
			UsernameHeaders:     r.UsernameHeaders,
			UIDHeaders:          r.UIDHeaders,
			GroupHeaders:        r.GroupHeaders,
			ExtraHeaderPrefixes: r.ExtraHeaderPrefixes,
		}
	}
	f, err := NewAuthFilter(AuthConfig{
		ClientCAs:            clientCAs,
		RequestHeader:        rh,
		TokenReviews:         authn.AuthenticationV1().TokenReviews(),
		SubjectAccessReviews: authz.AuthorizationV1().SubjectAccessReviews(),
		AlwaysAllowPaths:     opts.AlwaysAllowPaths,
		AlwaysAllowGroups:    opts.AlwaysAllowGroups,
		TokenCacheTTL:        opts.TokenCacheTTL,
		AuthorizedCacheTTL:   opts.AuthorizedCacheTTL,
		UnauthorizedCacheTTL: opts.UnauthorizedCacheTTL,
		Log:                  log.WithName("auth"),
	})
	return f, authn, err
}

// reviewClient returns a client from the kubeconfig file, or client when
// the file is not set.
func reviewClient(
	client kubernetes.Interface,
	kubeconfig, flag string,
) (kubernetes.Interface, error) {
	if kubeconfig == "" {
		if client == nil {
			return nil, fmt.Errorf(
				"%s: not set and New was given no client; set it, pass a client, or disable auth "+
					"with --disable-serving-auth",
				flag,
			)
		}
		return client, nil
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{
			ExplicitPath: kubeconfig,
		},
		&clientcmd.ConfigOverrides{},
	).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: loading %s: %w", flag, kubeconfig, err)
	}
	// As KCM's delegating authentication and authorization clients.
	cfg.QPS, cfg.Burst, cfg.Timeout = 200, 400, 10*time.Second
	cfg = rest.AddUserAgent(cfg, "ctrlhost-serving")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", flag, kubeconfig, err)
	}
	return cs, nil
}

// withProfiling serves /debug/pprof/ itself and everything else with h.
func withProfiling(h http.Handler) http.Handler {
	var p profiling
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strings.TrimSuffix(pprofPrefix, "/") ||
			strings.HasPrefix(r.URL.Path, pprofPrefix) {
			p.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Handler returns the handler Serve serves: the handler given to New
// behind the auth filter (unless DisableAuth), with /debug/pprof/ when
// Profiling is on. It answers 404 to everything when serving is disabled.
func (s *Server) Handler() http.Handler { return s.handler }

// Options returns the defaulted options the Server was built with.
func (s *Server) Options() Options { return s.opts }

// CertPEM returns the PEM of the serving certificate chain, leaf first:
// the generated self-signed certificate (which a client can trust as a
// root), or the certificates of --tls-cert-file. Nil when serving is
// disabled.
// A self-signed certificate is generated by the first call that needs it;
// if that fails, CertPEM returns nil and Listen returns the error.
func (s *Server) CertPEM() []byte {
	if !s.opts.Enabled() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.certLocked(); err != nil {
		return nil
	}
	return append([]byte(nil), s.cert.pem...)
}

// certLocked generates the self-signed certificate, once, when no
// certificate files were given. s.mu must be held.
func (s *Server) certLocked() error {
	if s.cert.pem != nil {
		return nil
	}
	var cert servingCert
	var err error
	if s.opts.CertDir != "" {
		cert, err = selfSignedInDir(s.opts.CertDir, s.opts.PairName, s.opts.BindAddress, time.Now())
	} else {
		cert, err = selfSigned(s.opts.BindAddress, time.Now())
	}
	if err != nil {
		return fmt.Errorf("serving: self-signed certificate: %w", err)
	}
	s.cert = cert
	leaf := cert.tls.Leaf
	s.log.Info(
		"Generated a self-signed serving certificate in memory; it is not rotated, set --tls-cert-file "+
			"and --tls-private-key-file for one that is",
		"dnsNames",
		leaf.DNSNames,
		"ipAddresses",
		leaf.IPAddresses,
		"notAfter",
		leaf.NotAfter,
	)
	return nil
}

// Listen binds BindAddress:SecurePort (a port the kernel picks for
// PortEphemeral), so that a taken port is reported
// before anything else starts; ctx bounds the bind only. The listener is
// Serve's to use and close, or Close's when Serve is not called. When
// serving is disabled, Listen returns a nil address and no error.
func (s *Server) Listen(ctx context.Context) (net.Addr, error) {
	if !s.opts.Enabled() {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listenLocked(ctx)
}

func (s *Server) listenLocked(ctx context.Context) (net.Addr, error) {
	switch {
	case s.closed:
		return nil, errors.New("serving: Listen after Close")
	case s.ln != nil:
		return nil, errors.New("serving: Listen called twice")
	}
	if err := s.certLocked(); err != nil {
		return nil, err
	}
	if err := s.lookUpLocked(ctx); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(s.opts.BindAddress, strconv.Itoa(s.opts.listenPort()))
	lc := net.ListenConfig{}
	if s.opts.PermitAddressSharing {
		lc.Control = reuseAddress
	}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--bind-address/--secure-port: cannot listen on %s: %w", addr, err)
	}
	s.ln = ln
	return ln.Addr(), nil
}

// Close releases the listener bound by Listen when Serve will not be
// called. It has no effect on a running Serve, which ends with its context.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.served || s.ln == nil {
		return nil
	}
	return s.ln.Close()
}

// Serve serves HTTPS on the listener bound by Listen (binding it first if
// Listen was not called) until ctx is done, then shuts the server down:
// request contexts are cancelled, in-flight requests get ShutdownTimeout to
// finish, then connections are closed. It returns when the server's
// goroutines have ended, with the error that stopped serving, if any, or
// the failure to shut down in time. Serve may be called once. When serving
// is disabled, it returns nil at once.
func (s *Server) Serve(ctx context.Context) error {
	if !s.opts.Enabled() {
		return nil
	}
	s.mu.Lock()
	if s.served {
		s.mu.Unlock()
		return errors.New("serving: Serve called twice")
	}
	if s.ln == nil {
		if _, err := s.listenLocked(ctx); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	if s.closed {
		s.mu.Unlock()
		return errors.New("serving: Serve after Close")
	}
	s.served = true
	ln := s.ln
	s.mu.Unlock()

	// Request contexts end when shutdown begins, so that long requests
	// (CPU profiles, traces) stop early instead of holding the shutdown.
	reqCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := &http.Server{
		Handler:           s.handler,
		TLSConfig:         s.tlsConfig(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    1 << 20,
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
		ErrorLog:          stdlog.New(serverErrorWriter{s.log}, "", 0),
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	s.log.Info("Serving securely", "address", ln.Addr().String(), "certificate", s.cert.source,
		"authentication", !s.opts.DisableAuth, "profiling", s.opts.Profiling)

	select {
	case err := <-done: // ServeTLS failed on its own; it closed the listener
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	cancelRequests()
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	var shutErr error
	if err := srv.Shutdown(sctx); err != nil {
		shutErr = fmt.Errorf(
			"serving on %s: graceful shutdown within %v: %w",
			ln.Addr(),
			s.opts.ShutdownTimeout,
			err,
		)
		if err := srv.Close(); err != nil {
			shutErr = errors.Join(shutErr, err)
		}
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		shutErr = errors.Join(fmt.Errorf("serving on %s: %w", ln.Addr(), err), shutErr)
	}
	s.log.Info("Stopped serving", "address", ln.Addr().String())
	return shutErr
}

// lookUpLocked completes the filter with what the cluster publishes for the
// CA files not given (once, before serving starts), as KCM does at start.
// s.mu must be held.
func (s *Server) lookUpLocked(ctx context.Context) error {
	if s.lookup == nil {
		return nil
	}
	client := s.lookup
	s.lookup = nil
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	found, err := lookUp(ctx, client)
	switch {
	case err != nil && s.opts.TolerateLookupFailure:
		s.log.Info(
			"WARNING: continuing without the cluster's client CA and front-proxy settings; only bearer "+
				"tokens (and the CA files given) authenticate",
			"err",
			err.Error(),
			"flag",
			"--authentication-tolerate-lookup-failure",
		)
		return nil
	case err != nil:
		return err
	}
	cfg := &s.filter.cfg
	if cfg.ClientCAs == nil && found.clientCAs != nil {
		cfg.ClientCAs = found.clientCAs
		s.log.V(1).Info("Client certificates are verified with the client CA the cluster publishes")
	}
	if cfg.RequestHeader == nil && found.requestHeader != nil {
		cfg.RequestHeader = found.requestHeader
		s.log.V(1).Info("Front-proxy requests are verified with the settings the cluster publishes")
	}
	return nil
}

// tlsConfig is the server's TLS configuration, with its certificate; it
// asks for client certificates when the filter verifies them.
func (s *Server) tlsConfig() *tls.Config {
	c := s.tls.Clone()
	c.Certificates = []tls.Certificate{s.cert.tls}
	if f := s.filter; f != nil && (f.cfg.ClientCAs != nil || f.cfg.RequestHeader != nil) {
		c.ClientAuth = tls.RequestClientCert // verified by the filter, against the right CAs
	}
	return c
}

// serverErrorWriter sends net/http's own error log (TLS handshake
// failures from untrusting clients, mostly) to the logger at V(2).
type serverErrorWriter struct{ log logr.Logger }

func (w serverErrorWriter) Write(p []byte) (int, error) {
	w.log.V(2).Info("HTTP server error", "message", strings.TrimSpace(string(p)))
	return len(p), nil
}
