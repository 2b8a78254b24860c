package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	// maxPortAttempts bounds how often a process is restarted on fresh
	// ports after losing one of its ports to another process.
	maxPortAttempts = 4

	// pollInterval is the pause between readiness checks.
	pollInterval = 100 * time.Millisecond
	// checkTimeout bounds a single readiness request.
	checkTimeout = 2 * time.Second

	// The rate limits of the rest.Configs an Env hands out; tests create
	// objects in bursts, and client-go's defaults (5 QPS) would throttle them.
	clientQPS   = 1000
	clientBurst = 2000
)

// Files in the Env's directory.
const (
	caFile           = "ca.crt"
	caKeyFile        = "ca.key"
	frontProxyCAFile = "front-proxy-ca.crt"
	frontProxyCert   = "front-proxy-client.crt"
	frontProxyKey    = "front-proxy-client.key"
	servingCertFile  = "apiserver.crt"
	servingKeyFile   = "apiserver.key"
	saKeyFile        = "sa.key"
	saPubFile        = "sa.pub"
	tokenFile        = "tokens.csv"
	etcdDataDir      = "etcd-data"
	apiserverCertDir = "apiserver-certs"
	etcdLog          = "etcd.log"
	apiserverLog     = "kube-apiserver.log"
)

// Env is a running etcd and kube-apiserver. Its methods are safe for
// concurrent use.
type Env struct {
	opts Options
	dir  string

	etcdURL      string
	apiserverURL string
	caPEM        []byte
	pki          *pki              // signs client certificates
	tokens       map[string]string // user name -> token; includes AdminUser

	etcd      *process
	apiserver *process

	stopOnce sync.Once
	stopErr  error

	mu       sync.Mutex
	stopped  bool
	finalLog string // the API server's log tail, kept when Stop removes dir
}

// Start runs etcd and kube-apiserver from the binaries BinaryPaths finds and
// returns once the API server is ready (see the package documentation for
// what that means), or the first of: opts.StartTimeout passing, ctx ending,
// either process exiting. Then it installs the CRDs of opts.CRDPaths, whose
// files it reads and checks before starting anything. ctx bounds only the
// start; the processes run until Stop. On error, everything Start began has
// been stopped and removed; the error quotes the logs of the processes
// involved, or names the CRD that could not be installed.
func Start(ctx context.Context, opts Options) (*Env, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	apiserverPath, etcdPath, err := BinaryPaths(opts)
	if err != nil {
		return nil, err
	}
	crds, err := readCRDFiles(opts.CRDPaths)
	if err != nil {
		return nil, err // names the file of Options.CRDPaths
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("testenv: not starting: %w", err)
	}

	dir, err := os.MkdirTemp("", "ctrlhost-testenv-")
	if err != nil {
		return nil, fmt.Errorf("testenv: creating the working directory: %w", err)
	}
	e := &Env{opts: opts, dir: dir}
	if err := e.start(ctx, apiserverPath, etcdPath, crds); err != nil {
		if stopErr := e.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("testenv: cleaning up after the failed start: %w", stopErr))
		}
		return nil, err
	}
	return e, nil
}

func (e *Env) start(ctx context.Context, apiserverPath, etcdPath string,
	crds []*crdSource,
) error {
	begin := time.Now()
	if err := e.writeCredentials(); err != nil {
		return err
	}
	if err := e.startEtcd(ctx, etcdPath); err != nil {
		return err
	}
	if err := e.startAPIServer(ctx, apiserverPath); err != nil {
		return err
	}
	e.opts.Logf("testenv: kube-apiserver ready at %s (etcd %s, dir %s) after %v",
		e.apiserverURL, e.etcdURL, e.dir, time.Since(begin).Round(time.Millisecond))
	if err := e.installCRDs(ctx, crds); err != nil {
		return err // names the CRD and its file of Options.CRDPaths
	}
	return nil
}

// writeCredentials generates the certificates, keys and tokens and writes
// them into the Env's directory.
func (e *Env) writeCredentials() error {
	p, err := newPKI(time.Now())
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	e.caPEM, e.pki = p.caPEM, p

	users := append([]User{{Name: AdminUser, Groups: []string{"system:masters"}}}, e.opts.Users...)
	e.tokens = make(map[string]string, len(users))
	entries := make([]tokenEntry, 0, len(users))
	for _, u := range users {
		tok, err := newToken()
		if err != nil {
			return fmt.Errorf("testenv: %w", err)
		}
		e.tokens[u.Name] = tok
		entries = append(entries, tokenEntry{token: tok, user: u})
	}
	tokens, err := renderTokenFile(entries)
	if err != nil {
		return fmt.Errorf("testenv: rendering the token file: %w", err)
	}

	for name, data := range map[string][]byte{
		caFile:           p.caPEM,
		caKeyFile:        p.caKeyPEM,
		frontProxyCAFile: p.frontProxyCAPEM,
		frontProxyCert:   p.frontProxyCert,
		frontProxyKey:    p.frontProxyKeyPEM,
		servingCertFile:  p.servingPEM,
		servingKeyFile:   p.servingKey,
		saKeyFile:        p.saKey,
		saPubFile:        p.saPub,
		tokenFile:        tokens,
	} {
		if err := os.WriteFile(e.path(name), data, 0o600); err != nil {
			return fmt.Errorf("testenv: %w", err)
		}
	}
	return nil
}

func (e *Env) path(name string) string { return filepath.Join(e.dir, name) }

func (e *Env) startEtcd(ctx context.Context, path string) error {
	client, err := newCheckClient(nil)
	if err != nil {
		return err
	}
	defer client.close()

	dataDir := e.path(etcdDataDir)
	launch := func(ports []int) (*process, error) {
		client := "http://" + loopback(ports[0])
		peer := "http://" + loopback(ports[1])
		// A failed attempt may have left a member directory for other ports.
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, fmt.Errorf("testenv: clearing etcd data: %w", err)
		}
		p, err := startProcess("etcd", path, []string{
			"--name=testenv",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=testenv=" + peer,
			"--initial-cluster-state=new",
			"--unsafe-no-fsync=true",
			"--quota-backend-bytes=" + strconv.Itoa(512<<20),
		}, e.path(etcdLog))
		if err != nil {
			return nil, err
		}
		e.etcd, e.etcdURL = p, client
		return p, nil
	}
	retire := func() { e.etcd, e.etcdURL = nil, "" }
	ready := func(ctx context.Context) error { return client.etcdHealthy(ctx, e.etcdURL) }
	return e.startWithRetry(ctx, "etcd", 2, launch, retire, ready)
}

func (e *Env) startAPIServer(ctx context.Context, path string) error {
	client, err := newCheckClient(e.caPEM)
	if err != nil {
		return err
	}
	defer client.close()

	launch := func(ports []int) (*process, error) {
		args := []string{
			"--etcd-servers=" + e.etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + e.path(apiserverCertDir),
			"--tls-cert-file=" + e.path(servingCertFile),
			"--tls-private-key-file=" + e.path(servingKeyFile),
			"--client-ca-file=" + e.path(caFile),
			"--token-auth-file=" + e.path(tokenFile),
			"--authorization-mode=" + e.opts.Authorization,
			"--service-account-issuer=" + ServiceAccountIssuer,
			"--service-account-key-file=" + e.path(saPubFile),
			"--service-account-signing-key-file=" + e.path(saKeyFile),
			"--api-audiences=" + ServiceAccountIssuer,
			"--service-cluster-ip-range=" + ServiceClusterIPRange,
			"--allow-privileged=true",
			// Front-proxy settings as kubeadm sets them; the API server
			// publishes them in kube-system/extension-apiserver-authentication.
			"--requestheader-client-ca-file=" + e.path(frontProxyCAFile),
			"--requestheader-allowed-names=" + FrontProxyClientName,
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + e.path(frontProxyCert),
			"--proxy-client-key-file=" + e.path(frontProxyKey),
			// The lease and master-count reconcilers refuse a loopback
			// advertise address; there are no in-cluster clients anyway.
			"--endpoint-reconciler-type=none",
		}
		if f := e.opts.featureGatesFlag(); f != "" {
			args = append(args, f)
		}
		args = append(args, e.opts.ExtraAPIServerFlags...)
		p, err := startProcess("kube-apiserver", path, args, e.path(apiserverLog))
		if err != nil {
			return nil, err
		}
		e.apiserver, e.apiserverURL = p, "https://"+loopback(ports[0])
		return p, nil
	}
	retire := func() { e.apiserver, e.apiserverURL = nil, "" }
	ready := func(ctx context.Context) error {
		return client.apiserverReady(ctx, e.apiserverURL, e.tokens[AdminUser])
	}
	return e.startWithRetry(ctx, "kube-apiserver", 1, launch, retire, ready)
}

// startWithRetry launches a process on nports fresh loopback ports and waits
// until ready succeeds. When the process exits because a port was taken in
// the meantime, it is stopped, retire forgets it, and it is started again on
// new ports, up to maxPortAttempts times. A process that fails otherwise is
// left in the Env for Stop.
func (e *Env) startWithRetry(ctx context.Context, name string, nports int,
	launch func(ports []int) (*process, error), retire func(), ready func(context.Context) error,
) error {
	pick := e.opts.pickPorts
	if pick == nil {
		pick = freePorts
	}
	for attempt := 1; ; attempt++ {
		ports, err := pick(nports)
		if err != nil {
			return fmt.Errorf("testenv: picking ports for %s: %w", name, err)
		}
		begin := time.Now()
		p, err := launch(ports)
		if err != nil {
			return err
		}
		e.opts.Logf("testenv: started %s (pid %d) on ports %v", name, p.pid(), ports)
		err = e.waitReady(ctx, p, ready)
		if err == nil {
			e.opts.Logf("testenv: %s ready after %v", name, time.Since(begin).Round(time.Millisecond))
			return nil
		}
		if !errors.Is(err, errPortInUse) || attempt == maxPortAttempts {
			if errors.Is(err, errPortInUse) {
				err = fmt.Errorf("testenv: %s lost a port to another process %d times in a row: %w",
					name, attempt, err)
			}
			return err
		}
		e.opts.Logf("testenv: %s found port(s) %v taken (attempt %d of %d); retrying with new ports",
			name, ports, attempt, maxPortAttempts)
		if _, err := p.stop(); err != nil {
			return err
		}
		retire()
	}
}

// waitReady polls ready until it succeeds, failing at once when p or any
// process started before it exits, or when ctx ends.
func (e *Env) waitReady(ctx context.Context, p *process, ready func(context.Context) error) error {
	watched := []*process{p}
	if e.etcd != nil && e.etcd != p {
		watched = append(watched, e.etcd)
	}
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		checkCtx, cancel := context.WithTimeout(ctx, checkTimeout)
		lastErr := ready(checkCtx)
		cancel()
		if lastErr == nil {
			return nil
		}
		for _, w := range watched {
			if w.exited() {
				return w.earlyExitError()
			}
		}
		select {
		case <-ctx.Done():
			return e.notReadyError(ctx, p, lastErr)
		case <-ticker.C:
		}
	}
}

func (e *Env) notReadyError(ctx context.Context, p *process, lastErr error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "testenv: %s (pid %d) not ready: %v; last check: %v", p.name, p.pid(),
		context.Cause(ctx), lastErr)
	fmt.Fprintf(&b, "\nlast lines of %s:\n%s", p.logPath, tailFile(p.logPath, errorTailBytes))
	if e.etcd != nil && e.etcd != p {
		fmt.Fprintf(&b, "\nlast lines of %s:\n%s", e.etcd.logPath,
			tailFile(e.etcd.logPath, errorTailBytes/2))
	}
	return errors.New(b.String())
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		// Closed only after all are picked, so the n ports differ.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Stop terminates kube-apiserver and then etcd (SIGTERM to each process
// group, SIGKILL after a few seconds), waits until both have exited, and
// removes the Env's directory. It succeeds also when a process had already
// died. Calling it again returns the first call's result; it is safe on a nil
// Env.
func (e *Env) Stop() error {
	if e == nil {
		return nil
	}
	e.stopOnce.Do(func() { e.stopErr = e.stop() })
	return e.stopErr
}

func (e *Env) stop() error {
	var errs []error
	for _, p := range []*process{e.apiserver, e.etcd} {
		if p == nil {
			continue
		}
		wasRunning := !p.exited()
		killed, err := p.stop()
		switch {
		case err != nil:
			errs = append(errs, err)
		case !wasRunning:
			e.opts.Logf("testenv: %s (pid %d) had already exited: %v", p.name, p.pid(), p.exitErr)
		case killed:
			e.opts.Logf("testenv: %s (pid %d) ignored SIGTERM for %v and was killed",
				p.name, p.pid(), stopGrace)
		}
	}
	e.mu.Lock()
	if e.apiserver != nil {
		e.finalLog = tailFile(e.apiserver.logPath, logTailBytes)
	}
	e.stopped = true
	e.mu.Unlock()
	if err := os.RemoveAll(e.dir); err != nil {
		errs = append(errs, fmt.Errorf("testenv: removing %s: %w", e.dir, err))
	}
	return errors.Join(errs...)
}

// Config returns a new rest.Config for the administrator, a member of
// system:masters, authenticating with a bearer token and trusting the Env's
// CA. Its QPS and Burst are raised well above client-go's defaults.
func (e *Env) Config() *rest.Config {
	cfg, _ := e.UserConfig(AdminUser)
	return cfg
}

// UserConfig returns a new rest.Config that authenticates as the named
// Options.Users entry (or AdminUser) with its bearer token.
func (e *Env) UserConfig(name string) (*rest.Config, error) {
	tok, err := e.Token(name)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            e.apiserverURL,
		BearerToken:     tok,
		TLSClientConfig: rest.TLSClientConfig{CAData: slices.Clone(e.caPEM)},
		QPS:             clientQPS,
		Burst:           clientBurst,
	}, nil
}

// Token returns the bearer token of the named Options.Users entry (or
// AdminUser).
func (e *Env) Token(name string) (string, error) {
	tok, ok := e.tokens[name]
	if !ok {
		known := make([]string, 0, len(e.tokens))
		for n := range e.tokens {
			known = append(known, n)
		}
		slices.Sort(known)
		return "", fmt.Errorf("testenv: no user %q; known users: %s", name, strings.Join(known, ", "))
	}
	return tok, nil
}

// WriteKubeconfig writes a kubeconfig for the administrator to path, usable
// by kubectl and clientcmd; the CA and token are embedded. Parent directories
// are created as needed.
func (e *Env) WriteKubeconfig(path string) error {
	const name = "testenv"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   e.apiserverURL,
		CertificateAuthorityData: slices.Clone(e.caPEM),
	}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: e.tokens[AdminUser]}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: AdminUser,
		Namespace: "default"}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("testenv: writing kubeconfig: %w", err)
	}
	return nil
}

// PKIFiles are the paths of the Env's certificates and keys, as a kubeadm
// cluster has them, for programs that take them on their command line
// (kube-controller-manager's --cluster-signing-*, --root-ca-file,
// --client-ca-file, --requestheader-client-ca-file,
// --service-account-private-key-file). Keys are readable by their owner
// only.
type PKIFiles struct {
	// CAFile and CAKeyFile are the cluster CA: it signs the API server's
	// serving certificate and client certificates the API server trusts
	// (--client-ca-file).
	CAFile, CAKeyFile string
	// FrontProxyCAFile is the front-proxy CA (--requestheader-client-ca-file);
	// FrontProxyClientCertFile and FrontProxyClientKeyFile are the API
	// server's proxy client certificate (common name FrontProxyClientName).
	FrontProxyCAFile, FrontProxyClientCertFile, FrontProxyClientKeyFile string
	// ServiceAccountKeyFile signs service-account tokens (RSA, PKCS#8); the
	// API server verifies them with ServiceAccountPublicKeyFile.
	ServiceAccountKeyFile, ServiceAccountPublicKeyFile string
}

// PKI returns the paths of the Env's certificates and keys.
func (e *Env) PKI() PKIFiles {
	return PKIFiles{
		CAFile: e.path(caFile), CAKeyFile: e.path(caKeyFile),
		FrontProxyCAFile: e.path(frontProxyCAFile), FrontProxyClientCertFile: e.path(frontProxyCert),
		FrontProxyClientKeyFile: e.path(frontProxyKey),
		ServiceAccountKeyFile:   e.path(saKeyFile), ServiceAccountPublicKeyFile: e.path(saPubFile),
	}
}

// WriteClientCert writes a client certificate for user and groups, signed
// by the cluster CA, to prefix+".crt" and its key to prefix+".key" (0600),
// and returns both paths. The API server authenticates it as user.
func (e *Env) WriteClientCert(prefix, user string,
	groups ...string) (certFile, keyFile string, err error) {
	certPEM, keyPEM, err := clientCert(e.pki.caCert, e.pki.caKey, user, groups, time.Now())
	if err != nil {
		return "", "", fmt.Errorf("testenv: %w", err)
	}
	certFile, keyFile = prefix+".crt", prefix+".key"
	if err := os.MkdirAll(filepath.Dir(prefix), 0o700); err != nil {
		return "", "", fmt.Errorf("testenv: %w", err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("testenv: %w", err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("testenv: %w", err)
	}
	return certFile, keyFile, nil
}

// WriteClientCertKubeconfig writes a kubeconfig to path that authenticates
// with a client certificate for user and groups (embedded), as kubeadm's
// controller-manager.conf does for system:kube-controller-manager.
func (e *Env) WriteClientCertKubeconfig(path, user string, groups ...string) error {
	certPEM, keyPEM, err := clientCert(e.pki.caCert, e.pki.caKey, user, groups, time.Now())
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	const name = "testenv"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: e.apiserverURL,
		CertificateAuthorityData: slices.Clone(e.caPEM)}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("testenv: writing kubeconfig: %w", err)
	}
	return nil
}

// Dir returns the Env's temporary directory (certificates, tokens, etcd
// data, logs). Stop removes it.
func (e *Env) Dir() string { return e.dir }

// APIServerURL returns the API server's address, https://127.0.0.1:<port>.
func (e *Env) APIServerURL() string { return e.apiserverURL }

// EtcdURL returns etcd's client address, http://127.0.0.1:<port>.
func (e *Env) EtcdURL() string { return e.etcdURL }

// APIServerPID returns the process ID of kube-apiserver, which is also the
// ID of its process group.
func (e *Env) APIServerPID() int { return e.apiserver.pid() }

// EtcdPID returns the process ID of etcd, which is also the ID of its process
// group.
func (e *Env) EtcdPID() int { return e.etcd.pid() }

// APIServerLog returns the last part of the API server's log, for failure
// messages. After Stop it returns what the log held when Stop ran.
func (e *Env) APIServerLog() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return e.finalLog
	}
	if e.apiserver == nil {
		return ""
	}
	return tailFile(e.apiserver.logPath, logTailBytes)
}
