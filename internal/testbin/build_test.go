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

// fakeGo is a go command that "builds" a script reporting the version the
// real binary would, and logs each call. It fails unless run in the tools
// module with GOWORK=off, as Build must run it.
const fakeGo = `#!/bin/sh
echo "$@" >> "$FAKE_GO_LOG"
[ -f go.mod ] && grep -q '^module ctrlhost-testbin-tools' go.mod || { echo "not in the tools module" >&2; exit 1; }
[ "$GOWORK" = off ] || { echo "GOWORK=$GOWORK" >&2; exit 1; }
out=""
for a; do
  if [ "$prev" = -o ]; then out="$a"; fi
  prev="$a"; pkg="$a"
done
case "$pkg" in
  *kube-apiserver) say="Kubernetes $FAKE_KUBE" ;;
  *) say="etcd Version: $FAKE_ETCD" ;;
esac
printf '#!/bin/sh\necho "%s"\n' "$say" > "$out"
chmod +x "$out"
`

func setupFakeGo(t *testing.T, kube, etcd string) (goCmd, log string) {
	t.Helper()
	dir := t.TempDir()
	goCmd = filepath.Join(dir, "go")
	if err := os.WriteFile(goCmd, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	log = filepath.Join(dir, "calls")
	t.Setenv("FAKE_GO_LOG", log)
	t.Setenv("FAKE_KUBE", kube)
	t.Setenv("FAKE_ETCD", etcd)
	t.Setenv("GOWORK", "")
	return goCmd, log
}

func calls(t *testing.T, log string) []string {
	t.Helper()
	data, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func TestBuild(t *testing.T) {
	v, err := testbin.ModuleVersions()
	if err != nil {
		t.Fatal(err)
	}
	goCmd, log := setupFakeGo(t, v.Kubernetes, strings.TrimPrefix(v.Etcd, "v"))
	out := filepath.Join(t.TempDir(), "bin")
	var progress bytes.Buffer

	dir, err := testbin.Build(t.Context(), testbin.BuildOptions{Dir: out, Go: goCmd, Log: &progress})
	if err != nil {
		t.Fatalf("Build: %v\n%s", err, progress.String())
	}
	if dir != out {
		t.Errorf("Build returned %s, want %s", dir, out)
	}
	got := calls(t, log)
	if len(got) != 2 || !strings.HasSuffix(got[0], " go.etcd.io/etcd/server/v3") || !strings.HasSuffix(got[1], " k8s.io/kubernetes/cmd/kube-apiserver") {
		t.Fatalf("go calls = %q, want a build of etcd, then of kube-apiserver", got)
	}
	if !strings.Contains(got[1], "gitVersion="+v.Kubernetes) {
		t.Errorf("kube-apiserver built without the version ldflags: %s", got[1])
	}
	for _, name := range []string{testbin.EtcdBinary, testbin.APIServerBinary} {
		if fi, err := os.Stat(filepath.Join(out, name)); err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s not installed as an executable: %v", name, err)
		}
	}
	entries, _ := os.ReadDir(out)
	if len(entries) != 2 {
		t.Errorf("output directory holds %d entries, want the two binaries and no temporary files", len(entries))
	}

	// Again: both report the right version, so nothing is built.
	if _, err := testbin.Build(t.Context(), testbin.BuildOptions{Dir: out, Go: goCmd, Log: &progress}); err != nil {
		t.Fatalf("second Build: %v", err)
	}
	if n := len(calls(t, log)); n != 2 {
		t.Errorf("second Build ran go %d more times, want 0", n-2)
	}
	if !strings.Contains(progress.String(), "up to date") {
		t.Errorf("progress does not say the binaries are up to date:\n%s", progress.String())
	}
}

func TestBuildWrongVersion(t *testing.T) {
	goCmd, _ := setupFakeGo(t, "v0.0.0-master", "3.7.0")
	out := t.TempDir()
	_, err := testbin.Build(t.Context(), testbin.BuildOptions{Dir: out, Go: goCmd})
	if err == nil || !strings.Contains(err.Error(), "kube-apiserver: the freshly built binary does not report") {
		t.Fatalf("Build = %v, want an error about kube-apiserver's version", err)
	}
	if _, err := os.Stat(filepath.Join(out, testbin.APIServerBinary)); !os.IsNotExist(err) {
		t.Errorf("a kube-apiserver of the wrong version was installed (stat: %v)", err)
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp.") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestBuildNoGo(t *testing.T) {
	_, err := testbin.Build(t.Context(), testbin.BuildOptions{Dir: t.TempDir(), Go: filepath.Join(t.TempDir(), "no-go")})
	if err == nil || !strings.Contains(err.Error(), "the go command") {
		t.Fatalf("Build = %v, want an error naming the go command", err)
	}
}

// Build of an older minor of the window builds from that minor's module:
// its kube-apiserver version and the etcd its release requires.
func TestBuildAnOlderMinor(t *testing.T) {
	minor := testbin.Minors()[0]
	m, err := testbin.ModuleOf(minor)
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.Versions()
	if err != nil {
		t.Fatal(err)
	}
	goCmd, log := setupFakeGo(t, v.Kubernetes, strings.TrimPrefix(v.Etcd, "v"))
	out := t.TempDir()
	if _, err := testbin.Build(t.Context(), testbin.BuildOptions{Dir: out, Go: goCmd,
		Minor: minor}); err != nil {
		t.Fatal(err)
	}
	if got := calls(t, log); len(got) != 2 || !strings.Contains(got[1], "gitVersion="+v.Kubernetes) {
		t.Fatalf("go calls = %q, want etcd, then kube-apiserver %s", got, v.Kubernetes)
	}
	_, err = testbin.Build(t.Context(), testbin.BuildOptions{Dir: t.TempDir(), Go: goCmd,
		Minor: "1.20"})
	if err == nil || !strings.Contains(err.Error(), "not in the tested window") {
		t.Errorf("Build of 1.20 = %v, want an error naming the window", err)
	}
	_, err = testbin.BuildCluster(t.Context(), testbin.BuildOptions{Dir: t.TempDir(), Go: goCmd,
		Minor: minor})
	if err == nil || !strings.Contains(err.Error(), "the cluster binaries are built for") {
		t.Errorf("BuildCluster of %s = %v, want an error: only the newest", minor, err)
	}
}
