package testbin

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The cluster binaries: what test/cluster starts beside etcd and
// kube-apiserver (a scheduler, kwok as the kubelet of simulated nodes,
// upstream's controller manager as the reference) and upstream's e2e test
// binary that test/conformance runs against it. BuildCluster builds them
// from three modules:
//
//   - kube-scheduler from the tools module (go.mod.txt), like
//     kube-apiserver;
//   - kube-controller-manager and e2e.test from e2emod/go.mod.txt, which
//     pins the same k8s.io/kubernetes with the same replace directives and
//     adds what they import beyond kube-apiserver (the kubelet's packages,
//     ginkgo), so that the tools module stays as small as testenv needs;
//   - kwok from kwokmod/go.mod.txt: it requires client-go v0.36 and is
//     built with its own requirements.
const (
	SchedulerPackage         = "k8s.io/kubernetes/cmd/kube-scheduler"
	ControllerManagerPackage = "k8s.io/kubernetes/cmd/kube-controller-manager"
	// E2EPackage is a test package: e2e.test is its test binary.
	E2EPackage = "k8s.io/kubernetes/test/e2e"

	KwokModule  = "sigs.k8s.io/kwok"
	KwokPackage = "sigs.k8s.io/kwok/cmd/kwok"

	SchedulerBinary         = "kube-scheduler"
	ControllerManagerBinary = "kube-controller-manager"
	E2EBinary               = "e2e.test"
	KwokBinary              = "kwok"
)

//go:embed e2emod/go.mod.txt
var e2eGoMod []byte

//go:embed e2emod/go.sum.txt
var e2eGoSum []byte

//go:embed kwokmod/go.mod.txt
var kwokGoMod []byte

//go:embed kwokmod/go.sum.txt
var kwokGoSum []byte

// ClusterVersions are the versions of the cluster binaries.
type ClusterVersions struct {
	// Kubernetes is k8s.io/kubernetes's version in both the tools module
	// and the e2e module (they must agree): kube-scheduler,
	// kube-controller-manager and e2e.test report it.
	Kubernetes string
	// Kwok is sigs.k8s.io/kwok's version, such as "v0.8.0".
	Kwok string
}

// ClusterModuleVersions returns the versions the embedded modules select,
// or an error when the e2e module's k8s.io/kubernetes differs from the
// tools module's.
func ClusterModuleVersions() (ClusterVersions, error) {
	v, err := ModuleVersions()
	if err != nil {
		return ClusterVersions{}, err
	}
	e2eKube, err := moduleVersion(e2eGoMod, KubernetesModule)
	if err != nil {
		return ClusterVersions{}, fmt.Errorf("testbin: e2emod/go.mod.txt: %w", err)
	}
	if e2eKube != v.Kubernetes {
		return ClusterVersions{}, fmt.Errorf(
			"testbin: e2emod/go.mod.txt pins %s %s, the tools module %s",
			KubernetesModule, e2eKube, v.Kubernetes)
	}
	kwok, err := moduleVersion(kwokGoMod, KwokModule)
	if err != nil {
		return ClusterVersions{}, fmt.Errorf("testbin: kwokmod/go.mod.txt: %w", err)
	}
	return ClusterVersions{Kubernetes: v.Kubernetes, Kwok: kwok}, nil
}

// moduleVersion returns the version a go.mod selects for module: its
// requirement, or the version a replace directive gives it instead. It
// understands the subset of go.mod syntax a tidy file uses: single-line and
// parenthesised require and replace directives, and // comments.
func moduleVersion(gomod []byte, module string) (string, error) {
	required := map[string]string{}
	replaced := map[string]string{}
	var block string
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case block != "" && f[0] == ")":
			block = ""
		case block == "" && len(f) == 2 && f[1] == "(" &&
			(f[0] == "require" || f[0] == "replace"):
			block = f[0]
		case block == "" && (f[0] == "require" || f[0] == "replace"):
			addDirective(f[0], f[1:], required, replaced)
		case block != "":
			addDirective(block, f, required, replaced)
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if v, ok := replaced[module]; ok {
		return v, nil
	}
	if v, ok := required[module]; ok {
		return v, nil
	}
	return "", fmt.Errorf("no requirement of %s", module)
}

// WriteClusterModules writes the e2e module into dir/e2e and the kwok
// module into dir/kwok, creating both directories.
func WriteClusterModules(dir string) error {
	for sub, files := range map[string]map[string][]byte{
		"e2e":  {"go.mod": e2eGoMod, "go.sum": e2eGoSum},
		"kwok": {"go.mod": kwokGoMod, "go.sum": kwokGoSum},
	} {
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("testbin: writing the %s module: %w", sub, err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(d, name), data, 0o644); err != nil {
				return fmt.Errorf("testbin: writing the %s module: %w", sub, err)
			}
		}
	}
	return nil
}

// clusterTarget is one cluster binary: which module builds it, and whether
// it is a test binary (go test -c) rather than a command (go build).
type clusterTarget struct {
	target
	module string // "tools", "e2e" or "kwok"
	test   bool
}

// clusterTargets lists the cluster binaries at versions v.
func clusterTargets(v ClusterVersions, ldflags string) []clusterTarget {
	kube := "Kubernetes " + v.Kubernetes
	return []clusterTarget{
		{target: target{name: SchedulerBinary, pkg: SchedulerPackage, want: kube,
			ldflags: ldflags}, module: "tools"},
		{target: target{name: ControllerManagerBinary, pkg: ControllerManagerPackage,
			want: kube, ldflags: ldflags}, module: "e2e"},
		{target: target{name: KwokBinary, pkg: KwokPackage,
			want: "kwok version " + v.Kwok}, module: "kwok"},
		// e2e.test --version prints the bare version. Last: it takes the
		// longest, and only test/conformance needs it.
		{target: target{name: E2EBinary, pkg: E2EPackage, want: v.Kubernetes,
			ldflags: ldflags}, module: "e2e", test: true},
	}
}

// BuildCluster builds kube-scheduler, kube-controller-manager, e2e.test
// (unless o.NoE2E) and kwok into o.Dir (see BuildOptions; etcd and kube-apiserver are Build's),
// each unless it is there and reports the version its module pins, and
// returns the directory. Like Build, it links each binary under a temporary
// name and renames it into place only after it ran, and its errors name the
// binary and the step. Each binary built is logged with the time it took.
func BuildCluster(ctx context.Context, o BuildOptions) (string, error) {
	if o.Minor != "" && o.Minor != DefaultModule().Minor() {
		return "", fmt.Errorf("testbin: BuildOptions.Minor %s: the cluster binaries are built "+
			"for %s only; leave Minor empty", o.Minor, DefaultModule().Minor())
	}
	v, err := ClusterModuleVersions()
	if err != nil {
		return "", err
	}
	goCmd, dir, err := o.prepare(v.Kubernetes)
	if err != nil {
		return "", err
	}
	mods, err := os.MkdirTemp("", "ctrlhost-testbin-cluster-")
	if err != nil {
		return "", fmt.Errorf("testbin: module directory: %w", err)
	}
	defer os.RemoveAll(mods)
	if err := os.Mkdir(filepath.Join(mods, "tools"), 0o755); err != nil {
		return "", fmt.Errorf("testbin: module directory: %w", err)
	}
	if err := WriteModule(filepath.Join(mods, "tools")); err != nil {
		return "", err
	}
	if err := WriteClusterModules(mods); err != nil {
		return "", err
	}
	ldflags, err := APIServerLDFlags(v.Kubernetes)
	if err != nil {
		return "", err
	}
	for _, t := range clusterTargets(v, ldflags) {
		if t.name == E2EBinary && o.NoE2E {
			continue
		}
		b := builder{goCmd: goCmd, mod: filepath.Join(mods, t.module), out: dir,
			log: o.Log, stderr: o.Stderr}
		if err := b.buildCluster(ctx, t); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// buildCluster is build for a cluster target, which may be a test binary.
func (b builder) buildCluster(ctx context.Context, t clusterTarget) error {
	if !t.test {
		return b.build(ctx, t.target)
	}
	dest := filepath.Join(b.out, t.name)
	if reportsVersion(ctx, dest, t.want) == nil {
		fmt.Fprintf(b.log, "testbin: %s: up to date (%s reports %q)\n", t.name, dest, t.want)
		return nil
	}
	tmp := filepath.Join(b.out, "."+t.name+".tmp."+strconv.Itoa(os.Getpid()))
	defer os.Remove(tmp)
	fmt.Fprintf(b.log, "testbin: %s: building the tests of %s (%s) -> %s\n",
		t.name, t.pkg, t.want, dest)
	start := time.Now()
	cmd := exec.CommandContext(ctx, b.goCmd, "test", "-c", "-o", tmp, "-ldflags", t.ldflags, t.pkg)
	cmd.Dir = b.mod
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stdout, cmd.Stderr = b.stderr, b.stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("testbin: %s: go test -c of %s failed (see its output above): %w",
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
