package kcm_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"k8s.io/kubernetes/cmd/kube-controller-manager/app"

	"github.com/ctrlhost/ctrlhost/controllers/builtin"
)

// TestBuiltinListFollowsKCMsRegistrationOrder: builtin.Options.List holds
// the native built-ins in the order KCM v1.37.1's NewControllerDescriptors
// registers them. KCM returns a map, so the order is read from its source
// (the module this test is built with): the register calls in that
// function, each descriptor constructor's names constant, and the names
// package's values.
func TestBuiltinListFollowsKCMsRegistrationOrder(t *testing.T) {
	kcm := kcmRegistrationOrder(t)
	var ours []string
	for _, b := range builtin.NewOptions().List() {
		ours = append(ours, b.Descriptor.Name())
	}
	pos := map[string]int{}
	for i, n := range kcm {
		pos[n] = i
	}
	last := -1
	for _, n := range ours {
		i, ok := pos[n]
		if !ok {
			t.Errorf("%s: not registered by KCM's NewControllerDescriptors", n)
			continue
		}
		if i < last {
			t.Errorf("%s comes after %s in the list; KCM registers it before", n, kcm[last])
		}
		last = max(last, i)
	}
	if t.Failed() {
		t.Logf("KCM's order: %s", strings.Join(kcm, ", "))
	}
}

// kcmRegistrationOrder returns the controller names NewControllerDescriptors
// registers, in its source's order.
func kcmRegistrationOrder(t *testing.T) []string {
	t.Helper()
	fn := runtime.FuncForPC(reflect.ValueOf(app.NewControllerDescriptors).Pointer())
	file, _ := fn.FileLine(fn.Entry())
	appDir := filepath.Dir(file)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("KCM's source is not where the binary says it was built from "+
			"(-trimpath?): %v", err)
	}
	fset := token.NewFileSet()
	consts := stringConsts(t, fset, filepath.Join(appDir, "..", "names"))
	nameOf := map[string]string{} // descriptor constructor → controller name
	var registers []string        // descriptor constructors, in order
	for _, f := range parseDir(t, fset, appDir) {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if fd.Name.Name == "NewControllerDescriptors" {
				registers = registerCalls(fd)
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				kv, ok := n.(*ast.KeyValueExpr)
				if !ok {
					return true
				}
				key, _ := kv.Key.(*ast.Ident)
				sel, _ := kv.Value.(*ast.SelectorExpr)
				if key != nil && key.Name == "name" && sel != nil {
					if pkg, _ := sel.X.(*ast.Ident); pkg != nil && pkg.Name == "names" {
						nameOf[fd.Name.Name] = consts[sel.Sel.Name]
					}
				}
				return true
			})
		}
	}
	if len(registers) == 0 {
		t.Fatalf("no register calls found in %s's NewControllerDescriptors", appDir)
	}
	var out []string
	for _, r := range registers {
		n, ok := nameOf[r]
		if !ok || n == "" {
			t.Fatalf("%s: no names constant found for its descriptor", r)
		}
		out = append(out, n)
	}
	if got, want := len(out), len(app.NewControllerDescriptors()); got != want {
		t.Fatalf("read %d registrations from the source, KCM has %d controllers", got, want)
	}
	return out
}

// registerCalls returns the functions whose results fd passes to
// register(...), in order.
func registerCalls(fd *ast.FuncDecl) []string {
	var out []string
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 1 {
			return true
		}
		if id, _ := call.Fun.(*ast.Ident); id == nil || id.Name != "register" {
			return true
		}
		if inner, ok := call.Args[0].(*ast.CallExpr); ok {
			if id, ok := inner.Fun.(*ast.Ident); ok {
				out = append(out, id.Name)
			}
		}
		return true
	})
	return out
}

// stringConsts returns the string constants declared in dir's Go files.
func stringConsts(t *testing.T, fset *token.FileSet, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range parseDir(t, fset, dir) {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[id.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []*ast.File
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}
