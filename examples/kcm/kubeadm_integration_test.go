//go:build integration

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/test/gobuild"
	"github.com/ctrlhost/ctrlhost/test/procs"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// kubeadmArgs is kubeadm's static-pod command line for KCM (v1.37), with
// the files testenv writes where kubeadm writes its own.
func kubeadmArgs(t *testing.T, env *testenv.Env) []string {
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

// program is this program, built once (with -race when the test is): it
// runs as a process of its own, as kubeadm's static pod runs KCM (run sets
// klog's global logger, which a test's own clients read concurrently).
var program = gobuild.New("github.com/ctrlhost/ctrlhost/examples/kcm").RaceLikeTest()

// TestKubeadmCommandLine: kubeadm's command line for KCM, as is (plus a
// free secure port), runs this program against a real API server: it
// takes KCM's Lease, node-ipam gives a new node a pod CIDR from
// --cluster-cidr, the bootstrap signer (selected by name, as kubeadm does)
// signs cluster-info with a bootstrap token, and it stops cleanly on
// SIGTERM.
func TestKubeadmCommandLine(t *testing.T) {
	env, err := testenv.Start(t.Context(), testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the environment: %v", err)
		}
	})
	cs, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	args := append(kubeadmArgs(t, env), "--secure-port="+strconv.Itoa(freePort(t)))
	p := procs.Start(t, "kcm", program.Path(t), args...)
	failed := func(what string) string { return what + "; its last lines:\n" + p.LastLines() }

	poll.Within(2*time.Minute).UntilContext(t, "it holds KCM's Lease",
		func(ctx context.Context) (bool, error) {
			l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, component,
				metav1.GetOptions{})
			if err != nil {
				return false, errors.New(failed(err.Error()))
			}
			return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
		})

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-node"}}
	if _, err := cs.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, clusterCIDR, _ := net.ParseCIDR("10.244.0.0/16")
	poll.Within(time.Minute).UntilContext(t, "the node gets a pod CIDR of --cluster-cidr",
		func(ctx context.Context) (bool, error) {
			n, err := cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil || n.Spec.PodCIDR == "" {
				return false, errors.New(failed("no pod CIDR yet"))
			}
			ip, cidr, err := net.ParseCIDR(n.Spec.PodCIDR)
			if err != nil || !clusterCIDR.Contains(ip) {
				return false, fmt.Errorf("pod CIDR %q is not in %v", n.Spec.PodCIDR, clusterCIDR)
			}
			if ones, _ := cidr.Mask.Size(); ones != 24 {
				return false, fmt.Errorf("pod CIDR %q, want a /24 (KCM's IPv4 default)",
					n.Spec.PodCIDR)
			}
			return true, nil
		})

	signBootstrapToken(t, cs, failed)
	p.Stop(time.Minute) // a clean exit, or the test fails
}

// signBootstrapToken creates kube-public/cluster-info and a signing
// bootstrap token, as kubeadm init does, and waits for the token's
// signature in cluster-info.
func signBootstrapToken(t *testing.T, cs kubernetes.Interface, failed func(string) string) {
	t.Helper()
	ctx := t.Context()
	info := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "cluster-info"},
		Data:       map[string]string{"kubeconfig": "apiVersion: v1\nkind: Config\nclusters: []\n"},
	}
	if _, err := cs.CoreV1().ConfigMaps("kube-public").Create(ctx, info,
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-abcdef"},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id":                "abcdef",
			"token-secret":            "0123456789abcdef",
			"usage-bootstrap-signing": "true",
		},
	}
	if _, err := cs.CoreV1().Secrets("kube-system").Create(ctx, token,
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Within(time.Minute).UntilContext(t, "cluster-info is signed with the token",
		func(ctx context.Context) (bool, error) {
			cm, err := cs.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info",
				metav1.GetOptions{})
			if err != nil || cm.Data["jws-kubeconfig-abcdef"] == "" {
				return false, errors.New(failed("not signed yet"))
			}
			return true, nil
		})
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
