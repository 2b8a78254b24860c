//go:build unix

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/ctrlhost/ctrlhost/testenv"
)

// Manager names a controller manager a cluster can run.
type Manager string

const (
	// Upstream is kube-controller-manager v1.37.1 itself, built from the
	// Go module proxy by testbin.BuildCluster: the reference.
	Upstream Manager = "upstream"
	// Native is ctrlhost's examples/kcm: the native built-ins on ctrlhost's
	// host.
	Native Manager = "native"
	// DropIn is upstream/cmd/kube-controller-manager: upstream's
	// controllers on ctrlhost's host.
	DropIn Manager = "dropin"
	// None starts no controller manager: the test starts its own
	// replicas (Cluster.StartReplica). Start then probes no pod (new
	// nodes keep their not-ready taint until node-lifecycle removes it).
	None Manager = "none"
)

// Managers lists the controller managers, the reference first.
var Managers = []Manager{Upstream, Native, DropIn}

// KubeadmArgs is kubeadm's static-pod command line for KCM (v1.37), with
// the cluster's files where kubeadm has its own, and the Env's service
// range. kubeconfig authenticates as system:kube-controller-manager.
func KubeadmArgs(pki testenv.PKIFiles, kubeconfig string) []string {
	return []string{
		"--allocate-node-cidrs=true",
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--client-ca-file=" + pki.CAFile,
		"--cluster-cidr=" + ClusterCIDR,
		"--cluster-name=kubernetes",
		"--cluster-signing-cert-file=" + pki.CAFile,
		"--cluster-signing-key-file=" + pki.CAKeyFile,
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=true",
		"--requestheader-client-ca-file=" + pki.FrontProxyCAFile,
		"--root-ca-file=" + pki.CAFile,
		"--service-account-private-key-file=" + pki.ServiceAccountKeyFile,
		"--service-cluster-ip-range=" + testenv.ServiceClusterIPRange,
		"--use-service-account-credentials=true",
	}
}

// BuildManagers builds those of managers that come from this repository's
// sources, the native (examples/kcm, root module) and the drop-in
// (upstream/cmd/kube-controller-manager, upstream module), into dir and
// returns their paths; Upstream is testbin.BuildCluster's and is left out.
// Each build's output goes to log, with the time it took.
func BuildManagers(ctx context.Context, dir string, log io.Writer, managers ...Manager) (
	map[Manager]string, error,
) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root, err := moduleRoot(wd)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	paths := map[Manager]string{}
	for _, b := range []struct {
		m        Manager
		module   string
		pkg, bin string
	}{
		{Native, root, "./examples/kcm", "kcm-native"},
		{DropIn, filepath.Join(root, "upstream"), "./cmd/kube-controller-manager", "kcm-dropin"},
	} {
		if !slices.Contains(managers, b.m) {
			continue
		}
		out := filepath.Join(dir, b.bin)
		start := time.Now()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, b.pkg)
		cmd.Dir = b.module
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("cluster: go build %s in %s: %w", b.pkg, b.module, err)
		}
		fmt.Fprintf(log, "cluster: built %s (%s) in %v\n", b.m, b.pkg,
			time.Since(start).Round(time.Second))
		paths[b.m] = out
	}
	return paths, nil
}

// moduleRoot walks up from dir to the root of module
// github.com/ctrlhost/ctrlhost.
func moduleRoot(dir string) (string, error) {
	for d := dir; ; {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/ctrlhost/ctrlhost\n")) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("cluster: %s is not inside module github.com/ctrlhost/ctrlhost",
				dir)
		}
		d = parent
	}
}
