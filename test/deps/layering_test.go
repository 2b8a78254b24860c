package deps

import (
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ctrlhost/ctrlhost"

// ownDeps returns, for every package of the root module (non-test files),
// the packages of the module it depends on, directly or not, relative to
// the module path.
func ownDeps(t *testing.T) map[string][]string {
	t.Helper()
	out := goCmd(t, root(t), "list", "-f", "{{.ImportPath}}:{{range .Deps}} {{.}}{{end}}", "./...")
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pkg, list, _ := strings.Cut(line, ":")
		var own []string
		for _, d := range strings.Fields(list) {
			if rel, ok := strings.CutPrefix(d, module+"/"); ok {
				own = append(own, rel)
			}
		}
		deps[strings.TrimPrefix(pkg, module+"/")] = own
	}
	return deps
}

// under reports whether pkg is dir or a package below it.
func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// TestLayering keeps the arrows of docs/architecture.md: dependencies point
// from manager to the rooms, from the built-ins to the kit, never back.
func TestLayering(t *testing.T) {
	deps := ownDeps(t)
	if len(deps) < 20 {
		t.Fatalf("go list found %d packages; the module has more", len(deps))
	}
	core := []string{"descriptor", "leader", "informers", "fence", "shard", "workloop",
		"healthz", "serving", "logging", "internal"}
	// The rooms that stand alone: they import nothing of ctrlhost but their
	// own internal packages.
	alone := []string{"healthz", "informers", "fence"}
	isCore := func(pkg string) bool {
		return slices.ContainsFunc(core, func(dir string) bool { return under(pkg, dir) })
	}
	// The term engine is a room of the host's own (under internal/, so
	// the core's rule keeps it from importing manager).
	if _, ok := deps["internal/term"]; !ok {
		t.Error("internal/term, the term engine, is not among the packages")
	}
	for pkg, own := range deps {
		for _, d := range own {
			switch {
			case slices.Contains(alone, pkg) && !under(d, pkg+"/internal"):
				t.Errorf("%s imports %s: it imports nothing of ctrlhost", pkg, d)
			case isCore(pkg) && (under(d, "manager") || under(d, "managertest") ||
				under(d, "controllers")):
				t.Errorf("%s (a core package) imports %s: nothing in the core imports "+
					"the manager or the built-ins", pkg, d)
			case under(pkg, "controllers") && pkg != "controllers/internal/controllertest" &&
				(under(d, "manager") || under(d, "managertest")):
				t.Errorf("%s imports %s: a built-in controller needs only the kit, "+
					"never the host", pkg, d)
			case d == "controllers/internal/controllertest" && pkg != d:
				t.Errorf("%s imports %s outside its tests: it is a test kit", pkg, d)
			case under(d, "test") && !under(pkg, "test"):
				t.Errorf("%s imports %s: nothing outside test/ imports it", pkg, d)
			}
		}
	}
}
