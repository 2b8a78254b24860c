package deps

import (
	"slices"
	"strings"
	"testing"
)

// testKits are the root module's packages made for tests: they may link
// test doubles and package testing, and nothing else may import them (a
// production package that did would link what they link).
var testKits = []string{
	"managertest",
	"testenv",
	"internal/fakeapi",
	"internal/poll",
	"leader/leadertest",
	"controllers/internal/controllertest",
	"controllers/internal/csr/csrtest",
}

// testKitDirs hold only tests, test kits and developer tools.
var testKitDirs = []string{"test", "hack"}

// isTestDouble reports whether a package path names a test double or a
// testing package.
func isTestDouble(pkg string) bool {
	return strings.Contains(pkg, "/fake") || strings.Contains(pkg, "fakeapi") ||
		strings.Contains(pkg, "testing")
}

// clientGoTesting is the one testing package a production binary links,
// and only because client-go's gentype does (its generic fake clients
// live in the same package as the real ones); none of its code is reached.
const clientGoTesting = "k8s.io/client-go/testing"

// TestNoTestDoublesInProduction: no production package of the root module
// (everything but the test kits, test/ and hack/: the host, the built-in
// controllers, the examples' binaries, cmd/) has a test double or a testing
// package in its dependency graph, but client-go's testing package, which
// only client-go's gentype may import.
func TestNoTestDoublesInProduction(t *testing.T) {
	out := goCmd(
		t,
		root(t),
		"list",
		"-deps",
		"-f",
		"{{.ImportPath}}:{{join .Imports \" \"}}",
		"./...",
	)
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pkg, list, _ := strings.Cut(line, ":")
		imports[pkg] = strings.Fields(list)
	}
	own := strings.Fields(goCmd(t, root(t), "list", "./..."))
	if len(own) < 20 {
		t.Fatalf("go list found %d packages; the module has more", len(own))
	}
	checked := 0
	for _, pkg := range own {
		rel := strings.TrimPrefix(pkg, module+"/")
		if slices.Contains(testKits, rel) || slices.ContainsFunc(testKitDirs,
			func(dir string) bool { return under(rel, dir) }) {
			continue
		}
		checked++
		graph := reach(imports, pkg)
		graph[pkg] = ""
		for dep, importer := range graph {
			if isTestDouble(dep) && dep != clientGoTesting {
				t.Errorf("%s links %s (imported by %s): keep test doubles behind the test kits",
					rel, dep, importer)
			}
			if dep != "k8s.io/client-go/gentype" && slices.Contains(imports[dep], clientGoTesting) {
				t.Errorf("%s links %s through %s: only client-go's gentype may import it", rel,
					clientGoTesting, dep)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d production packages; the module has more", checked)
	}
}

// reach returns every package root depends on, each with one package
// of the graph that imports it.
func reach(imports map[string][]string, root string) map[string]string {
	via := map[string]string{}
	stack := []string{root}
	for len(stack) > 0 {
		pkg := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, dep := range imports[pkg] {
			if _, seen := via[dep]; !seen && dep != root {
				via[dep] = pkg
				stack = append(stack, dep)
			}
		}
	}
	return via
}

// TestIsTestDouble: what the check above counts as a test double.
func TestIsTestDouble(t *testing.T) {
	for pkg, want := range map[string]bool{
		"k8s.io/client-go/metadata/fake":                true,
		"k8s.io/client-go/kubernetes/fake":              true,
		"github.com/ctrlhost/ctrlhost/internal/fakeapi": true,
		"testing":                      true,
		"testing/synctest":             true,
		"k8s.io/client-go/testing":     true,
		"k8s.io/client-go/metadata":    false,
		"k8s.io/client-go/tools/cache": false,
	} {
		if got := isTestDouble(pkg); got != want {
			t.Errorf("isTestDouble(%q) = %v, want %v", pkg, got, want)
		}
	}
}
