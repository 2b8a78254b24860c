// Command libnames counts the names of a library a package uses: every
// distinct package-level function, type, variable and constant, method and
// struct field of a package whose import path starts with -prefix that the
// package's files refer to, tests included, the program's own packages
// (its API types, say) excluded. It is how docs/operators.md
// counts what a newcomer must learn of ctrlhost, or of controller-runtime,
// to write the same operator.
//
//	go run ./hack/libnames -dir examples/widget-operator -prefix github.com/ctrlhost/ctrlhost/ \
//	    -tags integration
//
// -v lists the names.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

type listed struct {
	ImportPath   string
	Dir          string
	Export       string
	GoFiles      []string
	TestGoFiles  []string
	ForTest      string
	ImportMap    map[string]string
	DepOnly      bool
	Incomplete   bool
	Error        *struct{ Err string }
	XTestGoFiles []string
}

func main() {
	dir := flag.String("dir", ".", "the package's directory")
	prefix := flag.String("prefix", "", "import path prefix of the library whose names are counted")
	tags := flag.String("tags", "", "build tags, as go build -tags")
	verbose := flag.Bool("v", false, "list the names")
	flag.Parse()
	if *prefix == "" {
		fmt.Fprintln(os.Stderr, "libnames: -prefix is required (say github.com/ctrlhost/ctrlhost/)")
		os.Exit(2)
	}
	names, err := count(*dir, *prefix, *tags)
	if err != nil {
		fmt.Fprintln(os.Stderr, "libnames:", err)
		os.Exit(1)
	}
	if *verbose {
		for _, n := range names {
			fmt.Println(n)
		}
	}
	fmt.Println(len(names))
}

// count type-checks the package in dir with its in-package tests against
// export data from go list, and returns the library names it uses, sorted.
func count(dir, prefix, tags string) ([]string, error) {
	args := []string{"list", "-e", "-export", "-deps", "-test", "-json"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w", dir, err)
	}
	exports := map[string]string{}
	var target *listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := &listed{}
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		if p.Error != nil {
			return nil, fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		if p.Export != "" {
			exports[p.ImportPath] = p.Export
		}
		// The package compiled with its tests: "<path> [<path>.test]".
		if !p.DepOnly && p.ForTest != "" && strings.HasPrefix(p.ImportPath, p.ForTest+" ") {
			target = p
		}
	}
	if target == nil {
		return nil, fmt.Errorf("go list in %s: no package with in-package tests", dir)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range target.GoFiles { // the test variant's: tests included
		f, err := parser.ParseFile(fset, filepath.Join(target.Dir, name), nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if mapped, ok := target.ImportMap[path]; ok {
			path = mapped
		}
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	info := &types.Info{
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(target.ForTest, fset, files, info); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	owners := map[*types.Var]string{} // struct fields: the struct's name
	scanned := map[*types.Package]bool{}
	add := func(obj types.Object) {
		if obj == nil || obj.Pkg() == nil || !strings.HasPrefix(obj.Pkg().Path()+"/", prefix) ||
			strings.HasPrefix(
				obj.Pkg().Path()+"/",
				target.ForTest+"/",
			) { // the program's own packages
			return
		}
		if !scanned[obj.Pkg()] {
			scanned[obj.Pkg()] = true
			fieldOwners(obj.Pkg(), owners)
		}
		seen[describe(obj, owners)] = true
	}
	for _, obj := range info.Uses {
		add(obj)
	}
	for _, sel := range info.Selections {
		add(sel.Obj())
	}
	return slices.Sorted(func(yield func(string) bool) {
		for n := range seen {
			if !yield(n) {
				return
			}
		}
	}), nil
}

// describe names obj as go doc would: pkg.Name, pkg.Type.Method,
// pkg.Type.Field.
func describe(obj types.Object, owners map[*types.Var]string) string {
	pkg := obj.Pkg().Name()
	switch o := obj.(type) {
	case *types.Func:
		if recv := o.Signature().Recv(); recv != nil {
			return pkg + "." + typeName(recv.Type()) + "." + o.Name()
		}
	case *types.Var:
		if o.IsField() {
			if owner, ok := owners[o.Origin()]; ok {
				return pkg + "." + owner + "." + o.Name()
			}
			return pkg + ".?." + o.Name()
		}
	}
	return pkg + "." + obj.Name()
}

// fieldOwners records the struct type each field of pkg's named struct
// types belongs to, embedded structs' fields included.
func fieldOwners(pkg *types.Package, owners map[*types.Var]string) {
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok {
			continue
		}
		if st, ok := tn.Type().Underlying().(*types.Struct); ok {
			for i := range st.NumFields() {
				owners[st.Field(i)] = name
			}
		}
	}
}

func typeName(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	switch n := t.(type) {
	case *types.Named:
		return n.Obj().Name()
	case *types.Alias:
		return n.Obj().Name()
	}
	return t.String()
}
