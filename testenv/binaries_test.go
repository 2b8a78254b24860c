package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrlhost/ctrlhost/internal/testbin"
)

// fakeAPIServer is a kube-apiserver stand-in that reports version and
// otherwise sleeps.
func fakeAPIServer(version string) string {
	return "#!/bin/sh\nif [ \"$1\" = --version ]; then echo \"Kubernetes " + version + "\"; exit 0; fi\nexec sleep 600\n"
}

// writeBin writes an executable script to dir/name, creating dir.
func writeBin(t *testing.T, dir, name, script string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// binDirWith makes a directory holding a fake etcd and a fake kube-apiserver
// that reports version.
func binDirWith(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	writeBin(t, dir, etcdBinary, "#!/bin/sh\nexec sleep 600\n")
	writeBin(t, dir, apiserverBinary, fakeAPIServer(version))
	return dir
}

// clearBinEnv unsets both environment variables for the test and points
// the per-user cache directory at an empty temporary one, which it returns.
func clearBinEnv(t *testing.T) string {
	t.Setenv(EnvTestBin, "")
	t.Setenv(EnvKubebuilderAssets, "")
	t.Setenv(EnvKubernetesVersion, "") // make matrix sets it for the integration tests
	return isolateUserCache(t)
}

// isolateUserCache points os.UserCacheDir at a new temporary directory
// (XDG_CACHE_HOME on Linux; HOME elsewhere on unix) and returns the binary
// directory cmd/testbin would build into there.
func isolateUserCache(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
	t.Setenv("HOME", home)
	dir, err := testbin.CacheDir(KubernetesVersion)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBinaryPathsResolutionOrder(t *testing.T) {
	explicit := binDirWith(t, KubernetesVersion)
	testbin := binDirWith(t, KubernetesVersion)
	assets := binDirWith(t, "v1.30.0") // envtest binaries: version not checked

	// A module tree with the default directory, plus a nested module that
	// must not be mistaken for the root.
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "go.mod"), "// ctrlhost\nmodule github.com/ctrlhost/ctrlhost // the library\n\ngo 1.26.0\n")
	moduleBins := filepath.Join(root, "_output", "testbin", KubernetesVersion)
	writeBin(t, moduleBins, etcdBinary, "#!/bin/sh\n")
	writeBin(t, moduleBins, apiserverBinary, fakeAPIServer(KubernetesVersion))
	nested := filepath.Join(root, "hack", "testbin", "sub")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "hack", "testbin", "go.mod"), "module github.com/ctrlhost/ctrlhost/hack/testbin\n")

	// A directory outside the module, and a module tree without binaries.
	outside := t.TempDir()
	bare := t.TempDir()
	writeFile(t, filepath.Join(bare, "go.mod"), "module github.com/ctrlhost/ctrlhost\n")

	for _, tc := range []struct {
		name            string
		binDir          string
		testbin, assets string
		wd              string
		cache           bool // binaries in the per-user cache
		want            string
	}{
		{name: "explicit BinDir wins", binDir: explicit, testbin: testbin, assets: assets, wd: nested, want: explicit},
		{name: "CTRLHOST_TESTBIN before KUBEBUILDER_ASSETS", testbin: testbin, assets: assets, wd: nested, want: testbin},
		{name: "KUBEBUILDER_ASSETS, version not checked", assets: assets, wd: nested, want: assets},
		{name: "module root from a nested module", wd: nested, want: moduleBins},
		{name: "module root from the root", wd: root, want: moduleBins},
		{name: "relative BinDir", binDir: filepath.Join("_output", "testbin", KubernetesVersion), wd: root, want: moduleBins},
		{name: "module root before the user cache", wd: nested, cache: true, want: moduleBins},
		{name: "user cache when the module has none", wd: bare, cache: true, want: "<cache>"},
		{name: "user cache outside the module", wd: outside, cache: true, want: "<cache>"},
		{name: "CTRLHOST_TESTBIN before the user cache", testbin: testbin, wd: outside, cache: true, want: testbin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvTestBin, tc.testbin)
			t.Setenv(EnvKubebuilderAssets, tc.assets)
			t.Setenv(EnvKubernetesVersion, "")
			cache := isolateUserCache(t)
			if tc.cache {
				writeBin(t, cache, etcdBinary, "#!/bin/sh\n")
				writeBin(t, cache, apiserverBinary, fakeAPIServer(KubernetesVersion))
			}
			if tc.want == "<cache>" {
				tc.want = cache
			}
			t.Chdir(tc.wd)
			apiserver, etcd, err := BinaryPaths(Options{BinDir: tc.binDir})
			if err != nil {
				t.Fatalf("BinaryPaths: %v", err)
			}
			if want := filepath.Join(tc.want, apiserverBinary); apiserver != want {
				t.Errorf("apiserver = %s, want %s", apiserver, want)
			}
			if want := filepath.Join(tc.want, etcdBinary); etcd != want {
				t.Errorf("etcd = %s, want %s", etcd, want)
			}
		})
	}
}

func TestBinaryPathsErrors(t *testing.T) {
	hints := []string{`run "make testbin"`, "go run github.com/ctrlhost/ctrlhost/cmd/testbin@", EnvTestBin, EnvKubebuilderAssets}

	missing := filepath.Join(t.TempDir(), "nope")
	empty := t.TempDir()

	noExec := binDirWith(t, KubernetesVersion)
	if err := os.Chmod(filepath.Join(noExec, etcdBinary), 0o644); err != nil {
		t.Fatal(err)
	}

	isDir := t.TempDir()
	writeBin(t, isDir, etcdBinary, "#!/bin/sh\n")
	if err := os.Mkdir(filepath.Join(isDir, apiserverBinary), 0o755); err != nil {
		t.Fatal(err)
	}

	oldVersion := binDirWith(t, "v1.36.0")

	broken := t.TempDir()
	writeBin(t, broken, etcdBinary, "#!/bin/sh\n")
	writeBin(t, broken, apiserverBinary, "#!/bin/sh\necho 'flag provided but not defined' >&2\nexit 2\n")

	for _, tc := range []struct {
		name string
		opts Options
		want []string // all must appear in the error
	}{
		{
			name: "missing directory",
			opts: Options{BinDir: missing},
			want: append([]string{"binary directory " + missing + " (from Options.BinDir) does not exist"}, hints...),
		},
		{
			name: "missing binaries",
			opts: Options{BinDir: empty},
			want: append([]string{
				"kube-apiserver not found at " + filepath.Join(empty, apiserverBinary),
				"etcd not found at " + filepath.Join(empty, etcdBinary),
			}, hints...),
		},
		{
			name: "not executable",
			opts: Options{BinDir: noExec},
			want: append([]string{filepath.Join(noExec, etcdBinary) + " is not executable"}, hints...),
		},
		{
			name: "directory instead of a file",
			opts: Options{BinDir: isDir},
			want: append([]string{filepath.Join(isDir, apiserverBinary) + " is not a regular file"}, hints...),
		},
		{
			name: "wrong version",
			opts: Options{BinDir: oldVersion},
			want: append([]string{
				filepath.Join(oldVersion, apiserverBinary) + " is version v1.36.0, want " + KubernetesVersion,
				"SkipVersionCheck",
			}, hints...),
		},
		{
			name: "version command fails",
			opts: Options{BinDir: broken},
			want: append([]string{filepath.Join(broken, apiserverBinary) + " --version failed", "flag provided but not defined"}, hints...),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearBinEnv(t)
			_, _, err := BinaryPaths(tc.opts)
			if err == nil {
				t.Fatal("BinaryPaths succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}

	t.Run("wrong version accepted with SkipVersionCheck", func(t *testing.T) {
		clearBinEnv(t)
		if _, _, err := BinaryPaths(Options{BinDir: oldVersion, SkipVersionCheck: true}); err != nil {
			t.Fatalf("BinaryPaths: %v", err)
		}
	})

	t.Run("outside the module, nothing in the user cache", func(t *testing.T) {
		cache := clearBinEnv(t)
		t.Chdir(t.TempDir())
		_, _, err := BinaryPaths(Options{})
		if err == nil {
			t.Fatal("BinaryPaths succeeded outside the module, want an error")
		}
		for _, w := range append([]string{"binary directory " + cache + " (from the per-user cache directory) does not exist"}, hints...) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error does not mention %q:\n%v", w, err)
			}
		}
	})
}

func TestModuleName(t *testing.T) {
	for _, tc := range []struct{ gomod, want string }{
		{"module github.com/ctrlhost/ctrlhost\n", "github.com/ctrlhost/ctrlhost"},
		{"// comment\n\nmodule   github.com/ctrlhost/ctrlhost // trailing\n", "github.com/ctrlhost/ctrlhost"},
		{"module \"github.com/ctrlhost/ctrlhost\"\n", "github.com/ctrlhost/ctrlhost"},
		{"module github.com/ctrlhost/ctrlhost/hack/testbin\n", "github.com/ctrlhost/ctrlhost/hack/testbin"},
		{"modulex foo\ngo 1.26\n", ""},
		{"go 1.26\n", ""},
	} {
		if got := moduleName([]byte(tc.gomod)); got != tc.want {
			t.Errorf("moduleName(%q) = %q, want %q", tc.gomod, got, tc.want)
		}
	}
}

func TestParseKubeVersion(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{"Kubernetes v1.37.1\n", "v1.37.1"},
		{"W0101 warning\nKubernetes v1.37.1-rc.0\n", "v1.37.1-rc.0"},
		{"etcd Version: 3.7.0\n", ""},
		{"", ""},
	} {
		if got := parseKubeVersion([]byte(tc.out)); got != tc.want {
			t.Errorf("parseKubeVersion(%q) = %q, want %q", tc.out, got, tc.want)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// An older minor of the tested window is chosen with
// Options.KubernetesVersion or, for a whole suite, $CTRLHOST_KUBERNETES_VERSION:
// its version names the default directory and is the one checked.
func TestBinaryPathsOfAnOlderMinor(t *testing.T) {
	const older = "v1.34.4"
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "go.mod"), "module github.com/ctrlhost/ctrlhost\n")
	bins := filepath.Join(root, "_output", "testbin", older)
	writeBin(t, bins, etcdBinary, "#!/bin/sh\n")
	writeBin(t, bins, apiserverBinary, fakeAPIServer(older))
	t.Chdir(root)
	for _, tc := range []struct {
		name    string
		opts    Options
		env     string
		wantErr string
	}{
		{name: "Options.KubernetesVersion", opts: Options{KubernetesVersion: older}},
		{name: "the environment variable", env: older},
		{name: "the option before the variable", opts: Options{KubernetesVersion: older},
			env: KubernetesVersion},
		{name: "a binary of another version", opts: Options{KubernetesVersion: older,
			BinDir: binDirWith(t, KubernetesVersion)},
			wantErr: "is version " + KubernetesVersion + ", want " + older},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearBinEnv(t)
			isolateUserCache(t)
			t.Setenv(EnvKubernetesVersion, tc.env)
			apiserver, _, err := BinaryPaths(tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("BinaryPaths = %s, %v; want an error containing %q", apiserver, err,
						tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(bins, apiserverBinary); apiserver != want {
				t.Errorf("apiserver = %s, want %s", apiserver, want)
			}
		})
	}
}
