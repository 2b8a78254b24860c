package testbin_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/ctrlhost/ctrlhost/internal/testbin"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// The embedded module is where the Kubernetes version is written; testenv's
// constant and the upstream module's requirement must agree with it, and the
// Makefile reads it from there.
func TestModuleVersionsAgree(t *testing.T) {
	v, err := testbin.ModuleVersions()
	if err != nil {
		t.Fatal(err)
	}
	if v.Kubernetes != testenv.KubernetesVersion {
		t.Errorf("tools module pins k8s.io/kubernetes %s, testenv.KubernetesVersion is %s", v.Kubernetes, testenv.KubernetesVersion)
	}
	if !strings.HasPrefix(v.Etcd, "v3.") {
		t.Errorf("etcd version %q, want v3.x", v.Etcd)
	}
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBE_VERSION := .*\\\n\s*internal/testbin/go\.mod\.txt\)$`).Find(makefile)
	if m == nil {
		t.Error("Makefile's KUBE_VERSION is not read from internal/testbin/go.mod.txt")
	}
	upstream, err := os.ReadFile(filepath.Join("..", "..", "upstream", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes ` + regexp.QuoteMeta(v.Kubernetes) + `$`).Match(upstream) {
		t.Errorf("upstream/go.mod does not require k8s.io/kubernetes %s", v.Kubernetes)
	}
	if !bytes.Contains(testbin.GoSum(), []byte("k8s.io/kubernetes "+v.Kubernetes+" ")) {
		t.Errorf("go.sum has no hash for k8s.io/kubernetes %s", v.Kubernetes)
	}
}

func TestAPIServerLDFlags(t *testing.T) {
	got, err := testbin.APIServerLDFlags("v1.37.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		for _, kv := range []string{"gitVersion=v1.37.1", "gitMajor=1", "gitMinor=37", "gitTreeState=clean"} {
			if want := "-X " + pkg + "." + kv; !strings.Contains(got, want) {
				t.Errorf("ldflags %q lack %q", got, want)
			}
		}
	}
	if _, err := testbin.APIServerLDFlags("1.37"); err == nil {
		t.Error("APIServerLDFlags(1.37): no error")
	}
}

func TestCacheDir(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Logf("checking the path shape only on %s", runtime.GOOS)
	}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	got, err := testbin.CacheDir("v1.37.1")
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "ctrlhost", "testbin", "v1.37.1"); got != want {
		t.Errorf("CacheDir = %s, want %s", got, want)
	}
}

func TestWriteModule(t *testing.T) {
	dir := t.TempDir()
	if err := testbin.WriteModule(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"go.mod": testbin.GoMod(), "go.sum": testbin.GoSum()} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the embedded copy", name)
		}
	}
	if err := testbin.WriteModule(filepath.Join(dir, "missing")); err == nil {
		t.Error("WriteModule into a missing directory: no error")
	}
}
