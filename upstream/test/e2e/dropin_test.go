//go:build integration

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/test/gobuild"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// The drop-in's command line, beside the file and port flags startKCM
// adds.
var (
	// selected is --controllers: KCM's defaults plus the two bootstrap-token
	// controllers kubeadm turns on.
	selected = []string{"*", "bootstrapsigner", "tokencleaner"}

	kcmFlags = []string{
		"--controllers=" + strings.Join(selected, ","),
		"--leader-elect=true",
		"--leader-elect-lease-duration=15s",
		"--leader-elect-renew-deadline=10s",
		"--leader-elect-retry-period=2s",
		"--leader-elect-resource-name=kube-controller-manager",
		"--leader-elect-resource-namespace=kube-system",
		"--bind-address=127.0.0.1",
		// Nodes here have no kubelet; keep the node lifecycle controller
		// from marking them unreachable (and tainting them) mid-scenario.
		"--node-monitor-grace-period=10m",
		"--kube-api-qps=100",
		"--kube-api-burst=200",
		"--v=2",
	}
)

// stopTimeout bounds the drop-in's exit after SIGTERM.
const stopTimeout = 30 * time.Second

var kcmProgram = gobuild.New("../../cmd/kube-controller-manager").RaceLikeTest()

// kcmProcess is the package's one kube-controller-manager process.
type kcmProcess struct {
	once    sync.Once
	err     error
	dir     string // files the command line names, and its log
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process has exited; exitErr is then set
	exitErr error
	cs      kubernetes.Interface
	health  string // https://127.0.0.1:<port>
	signing *x509.Certificate
	saKey   *rsa.PublicKey
	rootCA  []byte
}

var dropIn = &kcmProcess{exited: make(chan struct{})}

// startKCM starts the drop-in the first time it is called and waits until
// it holds its lease; it returns the admin clientset.
func startKCM(t testing.TB) kubernetes.Interface {
	t.Helper()
	begin := time.Now()
	env := sharedEnv(t)
	envReady := time.Now()
	bin := kcmProgram.Path(t)
	built := time.Now()
	dropIn.once.Do(func() {
		dropIn.err = dropIn.launch(env, bin)
		if dropIn.err == nil {
			t.Logf("started the shared Env in %v, built kube-controller-manager in %v; it took its lease %v after starting",
				envReady.Sub(begin).Round(time.Millisecond), built.Sub(envReady).Round(time.Millisecond),
				time.Since(built).Round(time.Millisecond))
		}
	})
	if dropIn.err != nil {
		t.Fatalf("starting kube-controller-manager: %v", dropIn.err)
	}
	return dropIn.cs
}

func (p *kcmProcess) launch(env *testenv.Env, bin string) error {
	dir, err := os.MkdirTemp("", "ctrlhost-e2e-kcm-")
	if err != nil {
		return err
	}
	p.dir = dir
	cfg := env.Config()
	p.rootCA = cfg.TLSClientConfig.CAData
	path := func(name string) string { return filepath.Join(dir, name) }

	if err := env.WriteKubeconfig(path("kubeconfig")); err != nil {
		return err
	}
	if err := os.WriteFile(path("ca.crt"), p.rootCA, 0o600); err != nil {
		return err
	}
	caPEM, caKeyPEM, ca, err := signingCA()
	if err != nil {
		return err
	}
	p.signing = ca
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	p.saKey = &saKey.PublicKey
	saPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)})
	for name, data := range map[string][]byte{"signing.crt": caPEM, "signing.key": caKeyPEM, "sa.key": saPEM} {
		if err := os.WriteFile(path(name), data, 0o600); err != nil {
			return err
		}
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	p.health = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	p.cs = cs

	logFile, err := os.Create(path("kcm.log"))
	if err != nil {
		return err
	}
	args := append([]string{
		"--kubeconfig=" + path("kubeconfig"),
		"--root-ca-file=" + path("ca.crt"),
		"--cluster-signing-cert-file=" + path("signing.crt"),
		"--cluster-signing-key-file=" + path("signing.key"),
		"--service-account-private-key-file=" + path("sa.key"),
		"--secure-port=" + strconv.Itoa(port),
	}, kcmFlags...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	p.cmd = cmd
	go func() {
		p.exitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited before taking its lease: %v", p.exitErr)
		case <-ctx.Done():
			return fmt.Errorf("no lease holder after %v (last error: %v)", waitTimeout, err)
		case <-tick.C:
		}
	}
}

// stopKCM sends SIGTERM and requires exit status 0 within stopTimeout. It
// does nothing if the process was never started.
func stopKCM() error {
	if dropIn.cmd == nil {
		return nil
	}
	begin := time.Now()
	if err := dropIn.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGTERM to kube-controller-manager: %w", err)
	}
	select {
	case <-dropIn.exited:
	case <-time.After(stopTimeout):
		_ = dropIn.cmd.Process.Kill()
		<-dropIn.exited
		return fmt.Errorf("kube-controller-manager did not exit within %v of SIGTERM", stopTimeout)
	}
	if dropIn.exitErr != nil {
		return fmt.Errorf("kube-controller-manager after SIGTERM: %v, want exit status 0", dropIn.exitErr)
	}
	fmt.Fprintf(os.Stderr, "kube-controller-manager exited 0, %v after SIGTERM\n", time.Since(begin).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := dropIn.cs.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the lease after the stop: %w", err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		return fmt.Errorf("lease still held by %q after a graceful stop; it should be released", *h)
	}
	return nil
}

// dumpLog writes the tail of the drop-in's log, for a failed run.
func (p *kcmProcess) dumpLog(w io.Writer) {
	if p.dir == "" {
		return
	}
	const tail = 64 << 10
	b, err := os.ReadFile(filepath.Join(p.dir, "kcm.log"))
	if err != nil {
		fmt.Fprintf(w, "reading the kube-controller-manager log: %v\n", err)
		return
	}
	if len(b) > tail {
		b = b[len(b)-tail:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	fmt.Fprintf(w, "--- last %d bytes of the kube-controller-manager log:\n%s--- end of log\n", len(b), b)
}

// removeDir removes the files the command line named, once the process
// has exited.
func (p *kcmProcess) removeDir() {
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}

// signingCA returns a self-signed ECDSA CA for --cluster-signing-*.
func signingCA() (certPEM, keyPEM []byte, cert *x509.Certificate, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "e2e-cluster-signing-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), cert, nil
}

// freePort returns a loopback port nothing listens on right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
