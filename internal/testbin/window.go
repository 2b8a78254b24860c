package testbin

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The tested window of kube-apiserver minors. The newest is the tools
// module's (go.mod.txt): make test starts it. Each older one has a tools
// module of its own under window/<minor>/ (go.mod.txt, go.sum.txt), which
// pins that minor's k8s.io/kubernetes with the replace directives of its
// staging modules and the etcd server its kube-apiserver was released with,
// and which `make matrix` builds and runs the integration suites against.
// To add a minor, write a module as window/README.md says.
//
//go:embed window
var window embed.FS

// Module is one tools module: a go.mod and go.sum that pin
// k8s.io/kubernetes and the etcd server of one kube-apiserver minor.
type Module struct {
	minor        string
	goMod, goSum []byte
}

// DefaultModule is the tools module of the newest minor of the window, the
// one make test builds and testenv expects by default.
func DefaultModule() Module {
	// A malformed go.mod.txt leaves the minor empty; Versions says why.
	v, _ := parseVersions(goMod)
	return Module{minor: minorOf(v.Kubernetes), goMod: goMod, goSum: goSum}
}

// Minors returns the minors of the window, oldest first, such as
// ["1.34", "1.35", "1.36", "1.37"].
func Minors() []string {
	entries, _ := fs.ReadDir(window, "window")
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	out = append(out, DefaultModule().minor)
	slices.SortFunc(out, compareMinors)
	return slices.Compact(out)
}

// ModuleOf returns the tools module of minor ("1.34"). An error names the
// window when minor is not in it.
func ModuleOf(minor string) (Module, error) {
	def := DefaultModule()
	if minor == "" || minor == def.minor {
		return def, nil
	}
	m := Module{minor: minor}
	var err error
	if m.goMod, err = window.ReadFile("window/" + minor + "/go.mod.txt"); err != nil {
		return Module{}, fmt.Errorf("testbin: kube-apiserver %q is not in the tested window %v; "+
			"give one of those", minor, Minors())
	}
	if m.goSum, err = window.ReadFile("window/" + minor + "/go.sum.txt"); err != nil {
		return Module{}, fmt.Errorf("testbin: window/%s has no go.sum.txt", minor)
	}
	return m, nil
}

// Minor is the module's kube-apiserver minor, such as "1.37".
func (m Module) Minor() string { return m.minor }

// Versions are the versions the module selects.
func (m Module) Versions() (Versions, error) {
	v, err := parseVersions(m.goMod)
	if err != nil {
		return Versions{}, err
	}
	if got := minorOf(v.Kubernetes); m.minor != "" && got != m.minor {
		return Versions{}, fmt.Errorf("testbin: the module of %s pins %s %s", m.minor,
			KubernetesModule, v.Kubernetes)
	}
	return v, nil
}

// GoMod returns a copy of the module's go.mod.
func (m Module) GoMod() []byte { return slices.Clone(m.goMod) }

// Write writes the module (go.mod and go.sum) into dir, which must exist.
func (m Module) Write(dir string) error {
	for name, data := range map[string][]byte{"go.mod": m.goMod, "go.sum": m.goSum} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("testbin: writing the tools module of %s: %w", m.minor, err)
		}
	}
	return nil
}

// minorOf returns "1.37" of "v1.37.1", "" when v is not of that form.
func minorOf(v string) string {
	major, minor, err := kubeMajorMinor(v)
	if err != nil {
		return ""
	}
	return major + "." + minor
}

// compareMinors orders "1.9" before "1.10".
func compareMinors(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x - y
		}
	}
	return len(pa) - len(pb)
}
