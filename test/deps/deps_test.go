// Package deps guards the root module's dependency graph.
package deps

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// root is the root module's directory.
func root(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	//lint:ignore SA1019 the go command of the toolchain that built this test, whatever PATH says
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += ": " + string(ee.Stderr)
		}
		t.Fatalf("go %s: %s", strings.Join(args, " "), msg)
	}
	return string(out)
}

// TestRootModuleNeverImportsKubernetes: no package of the root module, under
// any build tag the project uses and with its tests, reaches
// k8s.io/kubernetes; that is the upstream module's alone (a module of its
// own, which ./... here does not enter).
func TestRootModuleNeverImportsKubernetes(t *testing.T) {
	dir := root(t)
	if mods := strings.Fields(goCmd(t, dir, "list", "-m")); len(mods) != 1 ||
		mods[0] != "github.com/ctrlhost/ctrlhost" {
		t.Fatalf(
			"go list -m in the root = %v, want only github.com/ctrlhost/ctrlhost "+
				"(no go.work joining the upstream module)",
			mods,
		)
	}
	for _, tags := range []string{"", "integration", "chaos"} {
		out := goCmd(t, dir, "list", "-deps", "-test", "-tags", tags, "./...")
		for _, pkg := range strings.Fields(out) {
			if pkg == "k8s.io/kubernetes" || strings.HasPrefix(pkg, "k8s.io/kubernetes/") {
				t.Errorf("tags %q: the root module reaches %s", tags, pkg)
			}
			if strings.HasPrefix(pkg, "github.com/ctrlhost/ctrlhost/upstream") {
				t.Errorf(
					"tags %q: the root module lists %s, a package of the upstream module",
					tags,
					pkg,
				)
			}
		}
	}
}

// TestCloudProviderStaysInItsModule: k8s.io/cloud-provider, and the
// Kubernetes-minor-bound modules it requires (apiserver, controller-manager,
// component-helpers), are not in the root module's graph: a ctrlhost user
// who does not build a cloud-controller-manager never sees them. And the
// cloud module, like the root, never reaches k8s.io/kubernetes.
func TestCloudProviderStaysInItsModule(t *testing.T) {
	dir := root(t)
	for _, line := range strings.Split(goCmd(t, dir, "list", "-m", "all"), "\n") {
		mod, _, _ := strings.Cut(line, " ")
		switch mod {
		case "k8s.io/cloud-provider",
			"k8s.io/apiserver",
			"k8s.io/controller-manager",
			"k8s.io/component-helpers",
			"k8s.io/kubernetes":
			t.Errorf("the root module's graph holds %s", line)
		}
	}
	cloud := filepath.Join(dir, "cloud")
	for _, tags := range []string{"", "integration"} {
		pkgs := goCmd(t, cloud, "list", "-deps", "-test", "-tags", tags, "./...")
		for _, pkg := range strings.Fields(pkgs) {
			if pkg == "k8s.io/kubernetes" || strings.HasPrefix(pkg, "k8s.io/kubernetes/") ||
				strings.HasPrefix(pkg, "github.com/ctrlhost/ctrlhost/upstream") {
				t.Errorf("tags %q: the cloud module reaches %s", tags, pkg)
			}
		}
	}
}
