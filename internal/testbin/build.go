package testbin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// BuildOptions configures Build. The zero value builds into the per-user
// cache directory with the go command on PATH.
type BuildOptions struct {
	// Dir is the output directory, created if missing. Default:
	// CacheDir(<the Kubernetes version of Minor's module>).
	Dir string
	// Go is the go command. Default: "go", looked up on PATH.
	Go string
	// Log receives one line per step. Default: io.Discard.
	Log io.Writer
	// Stderr receives the go command's output. Default: os.Stderr.
	Stderr io.Writer
	// Minor is the kube-apiserver minor Build builds, one of Minors().
	// Default: the newest (DefaultModule). BuildCluster builds only the
	// newest.
	Minor string
	// NoE2E has BuildCluster leave e2e.test out: only the conformance run
	// needs it, and it takes most of BuildCluster's time.
	NoE2E bool
}

// versionTimeout bounds each "<binary> --version".
const versionTimeout = 20 * time.Second

// prepare fills o's defaults (the cache directory of kubernetes, the go
// command, the writers), creates the output directory and returns the go
// command's path and the directory's absolute path.
func (o *BuildOptions) prepare(kubernetes string) (goCmd, dir string, err error) {
	if o.Dir == "" {
		if o.Dir, err = CacheDir(kubernetes); err != nil {
			return "", "", err
		}
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if goCmd, err = exec.LookPath(o.Go); err != nil {
		return "", "", fmt.Errorf("testbin: the go command (%s) is not available: %w", o.Go, err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return "", "", fmt.Errorf("testbin: output directory: %w", err)
	}
	if dir, err = filepath.Abs(o.Dir); err != nil {
		return "", "", fmt.Errorf("testbin: output directory: %w", err)
	}
	return goCmd, dir, nil
}

// Build builds etcd and kube-apiserver into o.Dir (see BuildOptions) unless
// they are there already and report the versions the tools module pins,
// and returns the directory. Errors name the binary and the step that
// failed.
func Build(ctx context.Context, o BuildOptions) (string, error) {
	m, err := ModuleOf(o.Minor)
	if err != nil {
		return "", err
	}
	v, err := m.Versions()
	if err != nil {
		return "", err
	}
	goCmd, dir, err := o.prepare(v.Kubernetes)
	if err != nil {
		return "", err
	}
	mod, err := os.MkdirTemp("", "ctrlhost-testbin-")
	if err != nil {
		return "", fmt.Errorf("testbin: tools module directory: %w", err)
	}
	defer os.RemoveAll(mod)
	if err := m.Write(mod); err != nil {
		return "", err
	}
	ldflags, err := APIServerLDFlags(v.Kubernetes)
	if err != nil {
		return "", err
	}
	b := builder{goCmd: goCmd, mod: mod, out: dir, log: o.Log, stderr: o.Stderr}
	for _, t := range targets(v, ldflags) {
		if err := b.build(ctx, t); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// target is one binary to build.
type target struct {
	name, pkg string
	// want is what the binary's --version output must contain.
	want    string
	ldflags string
}

// targets lists the binaries of the tools module at versions v.
func targets(v Versions, apiserverLDFlags string) []target {
	return []target{
		{name: EtcdBinary, pkg: EtcdPackage, want: "etcd Version: " + strings.TrimPrefix(v.Etcd, "v")},
		{name: APIServerBinary, pkg: APIServerPackage, want: "Kubernetes " + v.Kubernetes,
			ldflags: apiserverLDFlags},
	}
}

type builder struct {
	goCmd, mod, out string
	log, stderr     io.Writer
}

func (b builder) build(ctx context.Context, t target) error {
	dest := filepath.Join(b.out, t.name)
	if reportsVersion(ctx, dest, t.want) == nil {
		fmt.Fprintf(b.log, "testbin: %s: up to date (%s reports %q)\n", t.name, dest, t.want)
		return nil
	}
	if _, err := os.Stat(dest); err == nil {
		fmt.Fprintf(b.log, "testbin: %s: %s does not report %q; rebuilding\n", t.name, dest, t.want)
	}
	tmp := filepath.Join(b.out, "."+t.name+".tmp."+strconv.Itoa(os.Getpid()))
	defer os.Remove(tmp)
	fmt.Fprintf(b.log, "testbin: %s: building %s (%s) -> %s\n", t.name, t.pkg, t.want, dest)
	start := time.Now()
	args := []string{"build", "-o", tmp}
	if t.ldflags != "" {
		args = append(args, "-ldflags", t.ldflags)
	}
	args = append(args, t.pkg)
	cmd := exec.CommandContext(ctx, b.goCmd, args...)
	cmd.Dir = b.mod
	cmd.Env = append(os.Environ(), "GOWORK=off") // the tools module belongs to no workspace
	cmd.Stdout, cmd.Stderr = b.stderr, b.stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("testbin: %s: go build of %s failed (see its output above): %w",
			t.name, t.pkg, err)
	}
	if err := reportsVersion(ctx, tmp, t.want); err != nil {
		return fmt.Errorf("testbin: %s: the freshly built binary does not report %q: %w",
			t.name, t.want, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("testbin: %s: %w", t.name, err)
	}
	fmt.Fprintf(b.log, "testbin: %s: done in %s\n", t.name, time.Since(start).Round(time.Second))
	return nil
}

// reportsVersion returns nil when "path --version" succeeds and its output
// contains want.
func reportsVersion(ctx context.Context, path, want string) error {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %w", path, err)
	}
	if !strings.Contains(string(out), want) {
		first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return errors.New("its --version says " + strconv.Quote(first))
	}
	return nil
}
