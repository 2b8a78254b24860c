//go:build unix

package testbin_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrlhost/ctrlhost/internal/testbin"
)

// The cluster modules pin what the tools module pins: the e2e module's
// k8s.io/kubernetes is the tools module's (BuildCluster refuses to build
// otherwise), and kwok's version is read from its own module.
func TestClusterModulesAgree(t *testing.T) {
	v, err := testbin.ClusterModuleVersions()
	if err != nil {
		t.Fatal(err)
	}
	tools, err := testbin.ModuleVersions()
	if err != nil {
		t.Fatal(err)
	}
	if v.Kubernetes != tools.Kubernetes {
		t.Errorf("cluster binaries at %s, tools module at %s", v.Kubernetes, tools.Kubernetes)
	}
	if !strings.HasPrefix(v.Kwok, "v0.") {
		t.Errorf("kwok version %q, want v0.x", v.Kwok)
	}
	dir := t.TempDir()
	if err := testbin.WriteClusterModules(dir); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ module, mustSum string }{
		{"e2e", "k8s.io/kubernetes " + v.Kubernetes + " "},
		{"e2e", "github.com/onsi/ginkgo/v2 "},
		{"kwok", "sigs.k8s.io/kwok " + v.Kwok + " "},
	} {
		sum, err := os.ReadFile(filepath.Join(dir, c.module, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(sum, []byte(c.mustSum)) {
			t.Errorf("the %s module's go.sum has no %q", c.module, c.mustSum)
		}
		if _, err := os.Stat(filepath.Join(dir, c.module, "go.mod")); err != nil {
			t.Error(err)
		}
	}
}

// fakeClusterGo is a go command that "builds" a script reporting what the
// real binary would, and logs each call with the module it ran in. It
// fails outside a module or without GOWORK=off, as BuildCluster must run
// it.
const fakeClusterGo = `#!/bin/sh
mod=$(sed -n 's/^module //p' go.mod)
[ -n "$mod" ] || { echo "not in a module" >&2; exit 1; }
[ "$GOWORK" = off ] || { echo "GOWORK=$GOWORK" >&2; exit 1; }
echo "$mod $*" >> "$FAKE_GO_LOG"
out=""
for a; do
  if [ "$prev" = -o ]; then out="$a"; fi
  prev="$a"; pkg="$a"
done
case "$pkg" in
  *kwok) say="kwok version $FAKE_KWOK go1.26" ;;
  */test/e2e) say="$FAKE_KUBE" ;;
  *) say="Kubernetes $FAKE_KUBE" ;;
esac
printf '#!/bin/sh\necho "%s"\n' "$say" > "$out"
chmod +x "$out"
`

func TestBuildCluster(t *testing.T) {
	v, err := testbin.ClusterModuleVersions()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goCmd := filepath.Join(dir, "go")
	if err := os.WriteFile(goCmd, []byte(fakeClusterGo), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "calls")
	t.Setenv("FAKE_GO_LOG", log)
	t.Setenv("FAKE_KUBE", v.Kubernetes)
	t.Setenv("FAKE_KWOK", v.Kwok)
	out := filepath.Join(t.TempDir(), "bin")
	var progress bytes.Buffer
	if _, err := testbin.BuildCluster(t.Context(), testbin.BuildOptions{Dir: out, Go: goCmd,
		Log: &progress}); err != nil {
		t.Fatalf("BuildCluster: %v\n%s", err, progress.String())
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	calls := strings.Split(strings.TrimSpace(string(data)), "\n")
	want := []struct{ module, prefix, pkg string }{
		{"ctrlhost-testbin-tools", "build ", testbin.SchedulerPackage},
		{"ctrlhost-testbin-e2e", "build ", testbin.ControllerManagerPackage},
		{"ctrlhost-testbin-kwok", "build ", testbin.KwokPackage},
		{"ctrlhost-testbin-e2e", "test -c ", testbin.E2EPackage},
	}
	if len(calls) != len(want) {
		t.Fatalf("go calls:\n%s\nwant %d", data, len(want))
	}
	for i, w := range want {
		c := calls[i]
		if !strings.HasPrefix(c, w.module+" "+w.prefix) || !strings.HasSuffix(c, " "+w.pkg) {
			t.Errorf("call %d = %q, want %s in module %s", i, c, w.prefix+w.pkg, w.module)
		}
		if w.pkg != testbin.KwokPackage && !strings.Contains(c, "gitVersion="+v.Kubernetes) {
			t.Errorf("call %d lacks the version ldflags: %q", i, c)
		}
	}
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	wantNames := "e2e.test kube-controller-manager kube-scheduler kwok"
	if got := strings.Join(names, " "); got != wantNames {
		t.Errorf("output directory holds %q, want %q and no temporary file", got, wantNames)
	}

	// Again: everything reports its version, so nothing is built.
	if _, err := testbin.BuildCluster(t.Context(), testbin.BuildOptions{Dir: out, Go: goCmd,
		Log: &progress}); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(log); !bytes.Equal(again, data) {
		t.Errorf("a second BuildCluster ran go again:\n%s", again[len(data):])
	}

	// A kwok that reports another version is rebuilt, and one that fails
	// to is not installed.
	t.Setenv("FAKE_KWOK", "v0.0.1")
	if err := os.Remove(filepath.Join(out, testbin.KwokBinary)); err != nil {
		t.Fatal(err)
	}
	_, err = testbin.BuildCluster(t.Context(), testbin.BuildOptions{Dir: out, Go: goCmd})
	const wrong = "kwok: the freshly built binary does not report"
	if err == nil || !strings.Contains(err.Error(), wrong) {
		t.Fatalf("BuildCluster = %v, want an error about kwok's version", err)
	}
	if _, err := os.Stat(filepath.Join(out, testbin.KwokBinary)); !os.IsNotExist(err) {
		t.Errorf("a kwok of the wrong version was installed (stat: %v)", err)
	}
}
