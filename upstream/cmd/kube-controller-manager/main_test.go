package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/pkg/features"

	"github.com/ctrlhost/ctrlhost/manager"
)

// Goroutines upstream packages start at import time are not ours. The
// integration tests' shared environment is stopped before the check.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(cleanup{m}, goleak.IgnoreCurrent())
}

type cleanup struct{ m *testing.M }

func (c cleanup) Run() int {
	code := c.m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the shared test environment:", err)
		code = 1
	}
	return code
}

// kubeadmArgs is kubeadm's static-pod command line for KCM, with its files
// under dir.
func kubeadmArgs(dir string) []string {
	f := func(name string) string { return filepath.Join(dir, name) }
	return []string{
		"--allocate-node-cidrs=true",
		"--authentication-kubeconfig=" + f("controller-manager.conf"),
		"--authorization-kubeconfig=" + f("controller-manager.conf"),
		"--bind-address=127.0.0.1",
		"--client-ca-file=" + f("ca.crt"),
		"--cluster-cidr=10.244.0.0/16",
		"--cluster-name=kubernetes",
		"--cluster-signing-cert-file=" + f("ca.crt"),
		"--cluster-signing-key-file=" + f("ca.key"),
		"--controllers=*,bootstrapsigner,tokencleaner",
		"--kubeconfig=" + f("controller-manager.conf"),
		"--leader-elect=true",
		"--requestheader-client-ca-file=" + f("front-proxy-ca.crt"),
		"--root-ca-file=" + f("ca.crt"),
		"--service-account-private-key-file=" + f("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/12",
		"--use-service-account-credentials=true",
	}
}

// TestKubeadmCommandLineParses: kubeadm's command line is accepted as is,
// and its values reach the host and the controllers' configuration.
func TestKubeadmCommandLineParses(t *testing.T) {
	var stdout, stderr bytes.Buffer
	p, code, done := prepare(kubeadmArgs(t.TempDir()), &stdout, &stderr)
	if done {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	h := p.host
	if !h.LeaderElect || !h.UseServiceAccountCredentials || h.Serving.BindAddress != "127.0.0.1" {
		t.Errorf("host options: leader-elect=%v use-sa-credentials=%v bind-address=%q", h.LeaderElect, h.UseServiceAccountCredentials, h.Serving.BindAddress)
	}
	if got := strings.Join(h.Controllers, ","); !strings.HasSuffix(got, "*,bootstrapsigner,tokencleaner") {
		t.Errorf("--controllers = %q", got)
	}
	if len(p.descriptors) < 40 {
		t.Errorf("%d descriptors; want every KCM controller", len(p.descriptors))
	}
}

// TestBadCommandLines: each is refused with exit code 2 and an error that
// names the problem.
func TestBadCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--contention-profiling"}, "--contention-profiling is a kube-controller-manager flag that ctrlhost does not implement"},
		{[]string{"--emulated-version=1.36"}, "--emulated-version is a kube-controller-manager flag that ctrlhost does not implement"},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"--controllers=*,nonsense"}, `unknown "nonsense"; the known names and aliases are: attachdetach, `},
		{[]string{"--concurrent-deployment-syncs=x"}, "concurrent-deployment-syncs"},
		{[]string{"--cidr-allocator-type=CloudAllocator"}, "CloudAllocator"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			_, code, done := prepare(tc.args, &stdout, &stderr)
			if !done || code != 2 {
				t.Fatalf("done=%v code=%d, want exit 2; stderr:\n%s", done, code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr.String())
			}
		})
	}
}

// TestFlagNamesNormalised: underscores are dashes, as in KCM.
func TestFlagNamesNormalised(t *testing.T) {
	var stdout, stderr bytes.Buffer
	p, code, done := prepare([]string{"--concurrent_deployment_syncs=3", "--leader_elect=false"}, &stdout, &stderr)
	if done {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if p.host.LeaderElect {
		t.Error("--leader_elect=false did not reach --leader-elect")
	}
}

// TestVersionAndHelp: --version prints KCM's format with the Kubernetes
// release of the controllers; --help groups flags in KCM's sections.
func TestVersionAndHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if _, code, done := prepare([]string{"--version"}, &stdout, &stderr); !done || code != 0 {
		t.Fatalf("--version: done=%v code=%d", done, code)
	}
	if got := strings.TrimSpace(stdout.String()); !strings.HasPrefix(got, "Kubernetes ") {
		t.Errorf("--version printed %q", got)
	}
	stdout.Reset()
	if _, code, done := prepare([]string{"--help"}, &stdout, &stderr); !done || code != 0 {
		t.Fatalf("--help: done=%v code=%d", done, code)
	}
	for _, section := range []string{"Generic flags:", "Deployment-controller flags:", "Leader-migration flags:", "Secure serving flags:"} {
		if !strings.Contains(stdout.String(), section) {
			t.Errorf("--help lacks section %q", section)
		}
	}
	if strings.Contains(stdout.String(), "--contention-profiling") {
		t.Error("--help shows a flag this host refuses")
	}
}

// TestFeatureGatesReachUpstream: --feature-gates sets the process-wide gate
// upstream controllers read, and the Manager skips a controller whose
// required gate it turns off.
func TestFeatureGatesReachUpstream(t *testing.T) {
	gate, gated := settableGate(t)
	was := utilfeature.DefaultFeatureGate.Enabled(gate)
	t.Cleanup(func() {
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{string(gate): was}); err != nil {
			t.Error(err)
		}
	})
	for _, on := range []bool{!was, was} {
		var stdout, stderr bytes.Buffer
		p, code, done := prepare([]string{"--feature-gates=" + string(gate) + "=" + strconv.FormatBool(on), "--secure-port=0"}, &stdout, &stderr)
		if done {
			t.Fatalf("exit %d:\n%s", code, stderr.String())
		}
		m, err := p.builder(testr.New(t)).
			WithClient(fake.NewClientset(), metadatafake.NewSimpleMetadataClient(runtime.NewScheme())).Build()
		if err != nil {
			t.Fatal(err)
		}
		if got := utilfeature.DefaultFeatureGate.Enabled(gate); got != on {
			t.Errorf("--feature-gates=%s=%v: the process-wide gate says %v", gate, on, got)
		}
		st, _ := m.Status(gated)
		if skipped := st.Phase == manager.PhaseSkipped; skipped == on {
			t.Errorf("--feature-gates=%s=%v: %s is %s", gate, on, gated, st.Phase)
		}
	}
}

// settableGate is an alpha gate an upstream controller requires (off by
// default, not locked, nothing depending on it). Trying gates with
// SetFromMap to find one would not do: a refused map stays in the gate and
// fails every later call.
func settableGate(t *testing.T) (featuregate.Feature, string) {
	t.Helper()
	const gate, controller = features.DRAResourcePoolStatus, "resourcepoolstatusrequest-controller"
	spec, ok := utilfeature.DefaultMutableFeatureGate.GetAll()[gate]
	if !ok || spec.LockToDefault || !slices.Contains(app.NewControllerDescriptors()[controller].GetRequiredFeatureGates(), gate) {
		t.Fatalf("%s (%+v) is no longer a settable gate of %s in this Kubernetes release; pick another", gate, spec, controller)
	}
	return gate, controller
}

// TestZPages: the drop-in serves /statusz and /flagz as KCM v1.37 does
// (upstream answers 200 on both): its title, the Kubernetes version it
// was built with, and the command line as parsed.
func TestZPages(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"--secure-port=0", "--concurrent-gc-syncs=7"}
	p, code, done := prepare(args, &stdout, &stderr)
	if done {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	meta := metadatafake.NewSimpleMetadataClient(runtime.NewScheme())
	m, err := p.builder(testr.New(t)).WithClient(fake.NewClientset(), meta).Build()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]string{
		"/statusz": {"\nkube-controller-manager statusz\nWarning: ", "Binary version",
			kubernetesVersion(), "Paths", "/flagz"},
		"/flagz": {"\nkube-controller-manager flagz\n", "concurrent-gc-syncs", "7",
			"leader-elect"},
	} {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("%s: %d", path, rec.Code)
		}
		for _, w := range want {
			if !strings.Contains(rec.Body.String(), w) {
				t.Errorf("%s lacks %q:\n%s", path, w, rec.Body)
			}
		}
	}
}
