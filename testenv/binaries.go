package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ctrlhost/ctrlhost/internal/testbin"
)

const (
	// modulePath is the module whose root holds the default binary directory.
	modulePath = "github.com/ctrlhost/ctrlhost"

	apiserverBinary = "kube-apiserver"
	etcdBinary      = "etcd"

	versionCheckTimeout = 20 * time.Second
)

// Where the binary directory came from, as reported in errors.
const (
	sourceOption      = "Options.BinDir"
	sourceTestBin     = "$" + EnvTestBin
	sourceKubebuilder = "$" + EnvKubebuilderAssets
	sourceModule      = "the ctrlhost module root"
	sourceCache       = "the per-user cache directory"
)

// defaultBinDir is the directory of version's binaries, relative to the
// ctrlhost module root, that "make testbin" (make matrix, for older
// minors) writes to and that BinaryPaths looks in first by default.
func defaultBinDir(version string) string { return filepath.Join("_output", "testbin", version) }

// BinaryPaths returns the paths of the kube-apiserver and etcd binaries that
// Start would run for opts, after checking that both are executable files
// and, unless the check is off (see Options.SkipVersionCheck), that
// kube-apiserver reports Options.KubernetesVersion. Every error names the path it is
// about and says how to build the binaries.
func BinaryPaths(opts Options) (apiserver, etcd string, err error) {
	version := opts.kubernetesVersion()
	dir, source, err := binDir(opts, version)
	if err != nil {
		return "", "", err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		reason := "is not a directory"
		if errors.Is(err, os.ErrNotExist) {
			reason = "does not exist"
		} else if err != nil {
			reason = err.Error()
		}
		return "", "", fmt.Errorf("testenv: binary directory %s (from %s) %s: %s",
			dir, source, reason, buildAdvice())
	}
	apiserver = filepath.Join(dir, apiserverBinary)
	etcd = filepath.Join(dir, etcdBinary)
	if err := errors.Join(
		checkExecutable(apiserver, source),
		checkExecutable(etcd, source),
	); err != nil {
		return "", "", err
	}
	if !opts.SkipVersionCheck && source != sourceKubebuilder {
		if err := checkAPIServerVersion(apiserver, version); err != nil {
			return "", "", err
		}
	}
	return apiserver, etcd, nil
}

// binDir resolves the binary directory and says where it came from.
func binDir(opts Options, version string) (dir, source string, err error) {
	switch {
	case opts.BinDir != "":
		dir, source = opts.BinDir, sourceOption
	case os.Getenv(EnvTestBin) != "":
		dir, source = os.Getenv(EnvTestBin), sourceTestBin
	case os.Getenv(EnvKubebuilderAssets) != "":
		dir, source = os.Getenv(EnvKubebuilderAssets), sourceKubebuilder
	default:
		dir, source, err = defaultDir(version)
		if err != nil {
			return "", "", err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", fmt.Errorf("testenv: binary directory %q (from %s): %w", dir, source, err)
	}
	return abs, source, nil
}

// defaultDir is the first existing directory of: <ctrlhost module
// root>/_output/testbin/<version> (when the working directory is inside the
// ctrlhost module) and the per-user cache directory that cmd/testbin builds
// into. When neither exists it returns the first of them, so that the
// error names the directory that was expected.
func defaultDir(version string) (dir, source string, err error) {
	type candidate struct{ dir, source string }
	var candidates []candidate
	var problems []string
	if wd, err := os.Getwd(); err != nil {
		problems = append(problems, "working directory: "+err.Error())
	} else if root, err := findModuleRoot(wd, modulePath); err != nil {
		problems = append(problems, err.Error())
	} else {
		candidates = append(candidates, candidate{filepath.Join(root, defaultBinDir(version)),
			sourceModule})
	}
	if cache, err := testbin.CacheDir(version); err != nil {
		problems = append(problems, err.Error())
	} else {
		candidates = append(candidates, candidate{cache, sourceCache})
	}
	if len(candidates) == 0 {
		return "", "", fmt.Errorf("testenv: cannot find the binaries: %s; set %s (or %s) to a "+
			"directory holding %s and %s",
			strings.Join(problems, "; "), EnvTestBin, EnvKubebuilderAssets, etcdBinary, apiserverBinary)
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c.dir); err == nil && fi.IsDir() {
			return c.dir, c.source, nil
		}
	}
	return candidates[0].dir, candidates[0].source, nil
}

// findModuleRoot walks up from dir to the directory whose go.mod declares
// module want.
func findModuleRoot(dir, want string) (string, error) {
	for d := filepath.Clean(dir); ; {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && moduleName(data) == want {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod for module %s in %s or any parent directory", want, dir)
		}
		d = parent
	}
}

// moduleName returns the path in the module directive of a go.mod file, or ""
// if there is none.
func moduleName(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '"' && rest[0] != '`') {
			continue
		}
		name := strings.TrimSpace(rest)
		if unq, err := strconv.Unquote(name); err == nil {
			name = unq
		}
		return name
	}
	return ""
}

// buildAdvice ends every error about a missing or wrong binary.
func buildAdvice() string {
	return fmt.Sprintf("run %q in the ctrlhost module, or %q from any other module, to build %s and "+
		"%s; or set %s or %s to a directory holding them",
		BuildHint, DownstreamBuildHint, etcdBinary, apiserverBinary, EnvTestBin, EnvKubebuilderAssets)
}

// checkExecutable reports whether path is a regular file someone may execute.
func checkExecutable(path, source string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("testenv: %s not found at %s (directory from %s): %s",
			filepath.Base(path), path, source, buildAdvice())
	case err != nil:
		return fmt.Errorf("testenv: %s: %w: %s", path, err, buildAdvice())
	case !fi.Mode().IsRegular():
		return fmt.Errorf("testenv: %s is not a regular file (mode %v, directory from %s): %s",
			path, fi.Mode(), source, buildAdvice())
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("testenv: %s is not executable (mode %v, directory from %s): %s",
			path, fi.Mode(), source, buildAdvice())
	}
	return nil
}

// checkAPIServerVersion runs "kube-apiserver --version" and compares the
// result with want.
func checkAPIServerVersion(path, want string) error {
	ctx, cancel := context.WithTimeout(context.Background(), versionCheckTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("testenv: %s --version failed: %w; output: %q: %s",
			path, err, truncate(strings.TrimSpace(string(out)), 512), buildAdvice())
	}
	found := parseKubeVersion(out)
	if found != want {
		if found == "" {
			found = fmt.Sprintf("unrecognised output %q", truncate(strings.TrimSpace(string(out)), 512))
		}
		return fmt.Errorf("testenv: %s is version %s, want %s: %s (or set Options.SkipVersionCheck)",
			path, found, want, buildAdvice())
	}
	return nil
}

// parseKubeVersion extracts "v1.2.3" from the "Kubernetes v1.2.3" line that
// Kubernetes commands print for --version.
func parseKubeVersion(out []byte) string {
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "Kubernetes" {
			return f[1]
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
