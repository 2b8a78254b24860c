// Package api records the exported API of ctrlhost's public packages, the
// way Go's own api/*.txt files do: one line per exported identifier (a
// constant, variable, function, type, method, struct field or interface
// method), sorted, so that a change to the public surface shows as a diff
// of a checked-in file.
//
// The lines come from the source, through go/doc, without type checking:
// a function's line shows its parameter and result types as written, with
// names left out (renaming a parameter is not an API change); a constant's
// line shows its declared type, if any, not its value.
package api

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Module is one Go module whose public packages are recorded.
type Module struct {
	// Dir is the module's root directory.
	Dir string
	// Path is its module path.
	Path string
	// Skip lists directories, relative to Dir, left out with everything
	// below them (other modules nested in this one, programs, tests).
	Skip []string
}

// Lines returns the API of every public package of m: each directory
// holding a non-main package, outside internal/, testdata/ and m.Skip.
func Lines(m Module) ([]string, error) {
	ctx := build.Default
	ctx.BuildTags = nil
	var lines []string
	err := filepath.WalkDir(m.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(m.Dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		base := d.Name()
		if rel != "." && (base == "internal" || base == "testdata" ||
			strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") ||
			slices.Contains(m.Skip, rel)) {
			return filepath.SkipDir
		}
		importPath := m.Path
		if rel != "." {
			importPath += "/" + rel
		}
		pkgLines, err := packageLines(&ctx, path, importPath)
		if err != nil {
			return err
		}
		lines = append(lines, pkgLines...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(lines)
	return slices.Compact(lines), nil
}

// packageLines returns the API lines of the package in dir, none when dir
// holds no buildable non-test files or a main package.
func packageLines(ctx *build.Context, dir, importPath string) ([]string, error) {
	bp, err := ctx.ImportDir(dir, 0)
	if err != nil {
		if _, ok := err.(*build.NoGoError); ok {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if bp.Name == "main" {
		return nil, nil
	}
	fset := token.NewFileSet()
	files := make([]*ast.File, 0, len(bp.GoFiles))
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, importPath)
	if err != nil {
		return nil, err
	}
	w := writer{fset: fset, prefix: "pkg " + importPath + ", "}
	for _, v := range p.Consts {
		w.values("const", v)
	}
	for _, v := range p.Vars {
		w.values("var", v)
	}
	for _, f := range p.Funcs {
		w.fn(f)
	}
	for _, t := range p.Types {
		w.typ(t)
	}
	return w.lines, nil
}

type writer struct {
	fset   *token.FileSet
	prefix string
	lines  []string
}

func (w *writer) add(format string, args ...any) {
	w.lines = append(w.lines, w.prefix+fmt.Sprintf(format, args...))
}

// expr prints an expression on one line.
func (w *writer) expr(e ast.Expr) string {
	if e == nil {
		return ""
	}
	var buf bytes.Buffer
	if err := printer.Fprint(&buf, w.fset, stripNames(e)); err != nil {
		return "<" + err.Error() + ">"
	}
	return strings.Join(strings.Fields(buf.String()), " ")
}

func (w *writer) values(kind string, v *doc.Value) {
	for _, spec := range v.Decl.Specs {
		vs := spec.(*ast.ValueSpec)
		for _, name := range vs.Names {
			if !name.IsExported() {
				continue
			}
			if vs.Type != nil {
				w.add("%s %s %s", kind, name.Name, w.expr(vs.Type))
			} else {
				w.add("%s %s", kind, name.Name)
			}
		}
	}
}

func (w *writer) fn(f *doc.Func) {
	sig := w.signature(f.Decl.Type)
	if f.Decl.Recv == nil {
		w.add("func %s%s", f.Name, sig)
		return
	}
	w.add("method (%s) %s%s", w.expr(f.Decl.Recv.List[0].Type), f.Name, sig)
}

// signature prints a function type without the keyword "func".
func (w *writer) signature(ft *ast.FuncType) string {
	s := w.expr(ft)
	return strings.TrimPrefix(s, "func")
}

func (w *writer) typ(t *doc.Type) {
	for _, v := range t.Consts {
		w.values("const", v)
	}
	for _, v := range t.Vars {
		w.values("var", v)
	}
	for _, f := range t.Funcs {
		w.fn(f)
	}
	for _, f := range t.Methods {
		w.fn(f)
	}
	for _, spec := range t.Decl.Specs {
		ts := spec.(*ast.TypeSpec)
		if !ts.Name.IsExported() {
			continue
		}
		name := ts.Name.Name
		if ts.TypeParams != nil {
			name += w.typeParams(ts.TypeParams)
		}
		switch typ := ts.Type.(type) {
		case *ast.StructType:
			w.add("type %s struct", name)
			for _, field := range typ.Fields.List {
				if len(field.Names) == 0 {
					if exportedEmbed(field.Type) {
						w.add("type %s struct, embedded %s", name, w.expr(field.Type))
					}
					continue
				}
				for _, n := range field.Names {
					if n.IsExported() {
						w.add("type %s struct, %s %s", name, n.Name, w.expr(field.Type))
					}
				}
			}
		case *ast.InterfaceType:
			w.add("type %s interface", name)
			for _, m := range typ.Methods.List {
				if len(m.Names) == 0 {
					w.add("type %s interface, embedded %s", name, w.expr(m.Type))
					continue
				}
				for _, n := range m.Names {
					if ft, ok := m.Type.(*ast.FuncType); ok && n.IsExported() {
						w.add("type %s interface, %s%s", name, n.Name, w.signature(ft))
					}
				}
			}
		default:
			if ts.Assign.IsValid() {
				w.add("type %s = %s", name, w.expr(ts.Type))
			} else {
				w.add("type %s %s", name, w.expr(ts.Type))
			}
		}
	}
}

func (w *writer) typeParams(fl *ast.FieldList) string {
	var parts []string
	for _, f := range fl.List {
		for _, n := range f.Names {
			parts = append(parts, n.Name+" "+w.expr(f.Type))
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// exportedEmbed reports whether an embedded field's type name is exported
// (T, *T, pkg.T).
func exportedEmbed(e ast.Expr) bool {
	switch t := e.(type) {
	case *ast.StarExpr:
		return exportedEmbed(t.X)
	case *ast.Ident:
		return t.IsExported()
	case *ast.SelectorExpr:
		return t.Sel.IsExported()
	case *ast.IndexExpr:
		return exportedEmbed(t.X)
	case *ast.IndexListExpr:
		return exportedEmbed(t.X)
	}
	return false
}

// stripNames returns e with the parameter and result names of every
// function type in it removed, so that a line shows types only; e is not
// modified.
func stripNames(e ast.Expr) ast.Expr {
	ft, ok := e.(*ast.FuncType)
	if !ok {
		return e
	}
	return &ast.FuncType{Params: stripFields(ft.Params), Results: stripFields(ft.Results)}
}

func stripFields(fl *ast.FieldList) *ast.FieldList {
	if fl == nil {
		return nil
	}
	out := &ast.FieldList{}
	for _, f := range fl.List {
		n := len(f.Names)
		if n == 0 {
			n = 1
		}
		for range n {
			out.List = append(out.List, &ast.Field{Type: stripNames(f.Type)})
		}
	}
	return out
}

// Write writes lines to path, one per line.
func Write(path string, lines []string) error {
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// Read reads a file Write wrote.
func Read(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// Count returns how many lines are top-level identifiers or methods, the
// names a reader meets in go doc's package index: fields and interface
// methods are not counted.
func Count(lines []string) int {
	n := 0
	for _, l := range lines {
		_, rest, _ := strings.Cut(l, ", ")
		if strings.Contains(rest, " struct, ") || strings.Contains(rest, " interface, ") {
			continue
		}
		n++
	}
	return n
}
