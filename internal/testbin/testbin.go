// Package testbin builds the etcd and kube-apiserver binaries that package
// testenv starts, from a tools module that pins k8s.io/kubernetes and
// go.etcd.io/etcd/server/v3. The module's go.mod and go.sum are embedded
// here (go.mod.txt, go.sum.txt: named so that Go does not take this
// directory for a module of its own); they are the one copy, used by
// cmd/testbin and `make testbin` alike.
//
// Build writes the module to a temporary directory and runs `go build` in
// it, so the sources come through the Go module proxy like any dependency.
// A binary that is present and reports the expected version is left alone;
// a new one is linked under a temporary name and renamed into place only
// after it ran, so an interrupted build never leaves a half-written binary.
//
// Guarantees: nothing is built or downloaded except by Build; every path
// and version is derived from the embedded go.mod. Non-guarantees: Build
// needs the go command, network access to the module proxy (or a warm
// module cache) and several minutes and gigabytes for kube-apiserver; it
// does not verify the binaries beyond their --version output.
package testbin

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

//go:embed go.mod.txt
var goMod []byte

//go:embed go.sum.txt
var goSum []byte

// The modules the tools module pins, and the packages built from them.
const (
	KubernetesModule = "k8s.io/kubernetes"
	EtcdModule       = "go.etcd.io/etcd/server/v3"

	APIServerPackage = "k8s.io/kubernetes/cmd/kube-apiserver"
	EtcdPackage      = "go.etcd.io/etcd/server/v3"

	APIServerBinary = "kube-apiserver"
	EtcdBinary      = "etcd"

	// EnvTestBin names the environment variable that points testenv (and
	// cmd/testbin) at a binary directory; testenv.EnvTestBin is the same.
	EnvTestBin = "CTRLHOST_TESTBIN"
)

// GoMod returns a copy of the tools module's go.mod.
func GoMod() []byte { return bytes.Clone(goMod) }

// GoSum returns a copy of the tools module's go.sum.
func GoSum() []byte { return bytes.Clone(goSum) }

// WriteModule writes the tools module (go.mod and go.sum) into dir, which
// must exist. To change the pinned versions, write it somewhere, run
// `go get` there, and copy both files back over go.mod.txt and go.sum.txt.
func WriteModule(dir string) error { return DefaultModule().Write(dir) }

// Versions are the module versions the tools module selects.
type Versions struct {
	// Kubernetes is k8s.io/kubernetes's version, such as "v1.37.1"; it is
	// the version kube-apiserver reports and names the binary directory.
	Kubernetes string
	// Etcd is go.etcd.io/etcd/server/v3's version, such as "v3.7.0".
	Etcd string
}

// ModuleVersions returns the versions the embedded go.mod selects.
func ModuleVersions() (Versions, error) { return DefaultModule().Versions() }

// parseVersions reads the versions of the two pinned modules from a go.mod
// (moduleVersion), honouring a replace directive that gives one of them
// another version.
func parseVersions(gomod []byte) (Versions, error) {
	pick := func(module string) (string, error) {
		v, err := moduleVersion(gomod, module)
		if err != nil {
			return "", fmt.Errorf("testbin: go.mod does not require %s (%w)", module, err)
		}
		return v, nil
	}
	kube, err := pick(KubernetesModule)
	if err != nil {
		return Versions{}, err
	}
	if _, _, err := kubeMajorMinor(kube); err != nil {
		return Versions{}, err
	}
	etcd, err := pick(EtcdModule)
	if err != nil {
		return Versions{}, err
	}
	return Versions{Kubernetes: kube, Etcd: etcd}, nil
}

// addDirective records one require ("path version") or replace
// ("path [version] => path version") line; a replace that points at a
// local directory has no version and is ignored.
func addDirective(kind string, f []string, required, replaced map[string]string) {
	switch kind {
	case "require":
		if len(f) == 2 {
			required[f[0]] = f[1]
		}
	case "replace":
		left, right, ok := strings.Cut(strings.Join(f, " "), "=>")
		from, to := strings.Fields(left), strings.Fields(right)
		if ok && len(from) >= 1 && len(to) == 2 {
			replaced[from[0]] = to[1]
		}
	}
}

var kubeVersionRE = regexp.MustCompile(`^v([0-9]+)\.([0-9]+)\.[0-9]+`)

// kubeMajorMinor splits "v1.37.1" into "1" and "37".
func kubeMajorMinor(v string) (major, minor string, err error) {
	m := kubeVersionRE.FindStringSubmatch(v)
	if m == nil {
		return "", "", fmt.Errorf("testbin: %s version %q is not of the form vMAJOR.MINOR.PATCH",
			KubernetesModule, v)
	}
	return m[1], m[2], nil
}

// APIServerLDFlags returns the -ldflags that make a kube-apiserver built
// from the module report version: without them it says v0.0.0-master.
func APIServerLDFlags(version string) (string, error) {
	major, minor, err := kubeMajorMinor(version)
	if err != nil {
		return "", err
	}
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X "+pkg+".gitVersion="+version,
			"-X "+pkg+".gitMajor="+major,
			"-X "+pkg+".gitMinor="+minor,
			"-X "+pkg+".gitTreeState=clean")
	}
	return strings.Join(flags, " "), nil
}

// CacheDir returns the per-user directory for the binaries of a Kubernetes
// version: <os.UserCacheDir()>/ctrlhost/testbin/<version>. testenv looks
// there when neither an environment variable nor the ctrlhost repository
// names another directory.
func CacheDir(kubeVersion string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("testbin: no per-user cache directory (%w); pass a directory explicitly",
			err)
	}
	return filepath.Join(base, "ctrlhost", "testbin", kubeVersion), nil
}
