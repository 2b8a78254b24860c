//go:build integration

package main

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/testenv"
	"github.com/ctrlhost/ctrlhost/upstream/kcm"
)

// kubeadmCommandLine is kubeadm's static-pod command line for KCM, with the
// files testenv writes as kubeadm would.
func kubeadmCommandLine(t testing.TB, env *testenv.Env) []string {
	t.Helper()
	pki := env.PKI()
	conf := filepath.Join(t.TempDir(), "controller-manager.conf")
	if err := env.WriteClientCertKubeconfig(conf, "system:kube-controller-manager"); err != nil {
		t.Fatal(err)
	}
	return []string{
		"--allocate-node-cidrs=true",
		"--authentication-kubeconfig=" + conf,
		"--authorization-kubeconfig=" + conf,
		"--bind-address=127.0.0.1",
		"--client-ca-file=" + pki.CAFile,
		"--cluster-cidr=10.244.0.0/16",
		"--cluster-name=kubernetes",
		"--cluster-signing-cert-file=" + pki.CAFile,
		"--cluster-signing-key-file=" + pki.CAKeyFile,
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--kubeconfig=" + conf,
		"--leader-elect=true",
		"--requestheader-client-ca-file=" + pki.FrontProxyCAFile,
		"--root-ca-file=" + pki.CAFile,
		"--service-account-private-key-file=" + pki.ServiceAccountKeyFile,
		"--service-cluster-ip-range=10.96.0.0/12",
		"--use-service-account-credentials=true",
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestKubeadmCommandLine: kubeadm's command line, as is (plus a lease name
// and a free port, since the API server is shared), starts the drop-in
// under leader election with per-controller ServiceAccount credentials;
// /healthz answers for every controller KCM would start; a controller acts
// with its own ServiceAccount's credentials; the secure port takes client
// certificates.
func TestKubeadmCommandLine(t *testing.T) {
	env := sharedEnv(t)
	cs := kubernetes.NewForConfigOrDie(env.Config())
	port := freePort(t)
	start := time.Now()
	p := startProcess(t, "kubeadm", append(kubeadmCommandLine(t, env),
		"--leader-elect-resource-name=it-kubeadm-"+strconv.FormatInt(time.Now().UnixNano(), 36),
		"--secure-port="+strconv.Itoa(port))...)
	p.WaitLog("Starting controllers", "main", start, 3*time.Minute)

	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	var body string
	deadline := time.After(2 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := insecure.Get(base + "/healthz?verbose")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("/healthz never answered 200 (last: %v)\n%s\nlog:\n%s", err, body, p.LastLines())
		}
	}
	enabled, err := kcm.UpstreamSelection([]string{"*", "bootstrapsigner", "tokencleaner"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range enabled {
		if !strings.Contains(body, "[+]"+name+" ok") {
			t.Errorf("/healthz?verbose has no passing check for %s", name)
		}
	}
	t.Logf("/healthz?verbose:\n%s", body)

	// The ReplicaSet controller acts, with the credentials of its own
	// ServiceAccount, kube-system/replicaset-controller (made for it).
	ns := namespace(t, cs)
	probe(t, cs, ns, "kubeadm", time.Minute)
	if _, err := cs.CoreV1().ServiceAccounts("kube-system").Get(t.Context(), "replicaset-controller", metav1.GetOptions{}); err != nil {
		t.Errorf("the replicaset controller's ServiceAccount: %v", err)
	}

	// /metrics with a client certificate of group system:masters.
	certFile, keyFile, err := env.WriteClientCert(filepath.Join(t.TempDir(), "admin"), "it-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}}}
	resp, err := withCert.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "workqueue_adds_total") {
		t.Errorf("/metrics with a system:masters client certificate: %d\n%.500s", resp.StatusCode, b)
	}
	if resp, err := insecure.Get(base + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("/metrics without credentials: %d, want 401", resp.StatusCode)
		}
	}
	p.Stop(time.Minute)
}
