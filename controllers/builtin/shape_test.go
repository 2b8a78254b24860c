package builtin_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEveryBuiltinHasTheShape: every built-in's package has the shape
// controllers/README.md describes, so that a newcomer finds the same
// things in the same places in each: a package doc in doc.go that states
// its Guarantees and Non-guarantees; Options, NewOptions and
// (*Options).AddFlags in options.go; every exported func named
// ...Descriptor in descriptor.go and nowhere else; a TestMain that checks
// for leaked goroutines; metrics registered through
// controllers/internal/collectors only, so that every term of a
// controller counts on the same collectors; and event handlers registered
// with Loop.Watch, or by hand where a comment in the same function says
// why not Loop.Watch, with the staleness guard fed (Loop.Observe and its
// kin) in a package that records its writes, unless a comment says it
// "needs no Observe"; and periodic passes through controllers/internal/passes,
// not wait.Until and its kin.
func TestEveryBuiltinHasTheShape(t *testing.T) {
	dirs, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "builtin" || d.Name() == "internal" {
			continue
		}
		t.Run(d.Name(), func(t *testing.T) {
			checkShape(t, filepath.Join("..", d.Name()))
		})
		checked++
	}
	if checked < 40 {
		t.Errorf("checked %d packages under controllers/, want every built-in (40 or more)",
			checked)
	}
}

// shape is what checkShape found in one package.
type shape struct {
	doc         map[string]string   // file → package doc
	decls       map[string][]string // file → top-level funcs and types ("Options", "(*Options).AddFlags")
	verifyLeaks bool
	registers   []string // "file: what" for each registration outside collectors
	// unexplained lists "file: func" for each function that registers an
	// event handler by hand without a comment naming Loop.Watch.
	unexplained []string
	// byHand: some handler is registered by hand; records: the package
	// records its writes for the staleness guard (Loop.Wrote); observes:
	// it calls Observe, ObserveAdd or ObserveDelete; excused: a comment
	// says the guard needs no Observe.
	byHand, records, observes, excused bool
	// loops lists "file: wait.X" for each periodic loop outside passes.
	loops []string
}

func checkShape(t *testing.T, dir string) {
	s := readShape(t, dir)
	doc := s.doc["doc.go"]
	switch {
	case doc == "":
		t.Error("doc.go holds no package doc")
	case !strings.Contains(doc, "Guarantees"):
		t.Error("the package doc states no Guarantees")
	case !strings.Contains(doc, "Non-guarantees"):
		t.Error("the package doc states no Non-guarantees")
	}
	for f, d := range s.doc {
		if f != "doc.go" && d != "" {
			t.Errorf("%s holds a package doc; it belongs in doc.go", f)
		}
	}
	for _, want := range []string{"Options", "NewOptions", "(*Options).AddFlags"} {
		if !slices.Contains(s.decls["options.go"], want) {
			t.Errorf("options.go does not declare %s", want)
		}
	}
	descriptors := 0
	for f, decls := range s.decls {
		for _, name := range decls {
			if !strings.HasSuffix(name, "Descriptor") || !ast.IsExported(name) {
				continue
			}
			descriptors++
			if f != "descriptor.go" {
				t.Errorf("%s declares %s; descriptors belong in descriptor.go", f, name)
			}
		}
	}
	if descriptors == 0 {
		t.Error("no exported func named ...Descriptor")
	}
	if !s.verifyLeaks {
		t.Error("no test calls goleak.VerifyTestMain")
	}
	for _, r := range s.registers {
		t.Errorf("%s: register metrics through controllers/internal/collectors", r)
	}
	for _, l := range s.loops {
		t.Errorf("%s: run periodic passes through controllers/internal/passes", l)
	}
	for _, f := range s.unexplained {
		t.Errorf("%s registers an event handler by hand; use Loop.Watch, or say in a "+
			"comment there why not Loop.Watch", f)
	}
	if s.byHand && s.records && !s.observes && !s.excused {
		t.Error("the package records its writes (Loop.Wrote) and registers handlers by hand, " +
			"but never calls Observe, ObserveAdd or ObserveDelete: its staleness guard " +
			"waits for deliveries it is never told of (or say it \"needs no Observe\")")
	}
}

func readShape(t *testing.T, dir string) shape {
	s := shape{doc: map[string]string{}, decls: map[string][]string{}}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(path)
		if strings.HasSuffix(name, "_test.go") {
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "VerifyTestMain" {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "goleak" {
						s.verifyLeaks = true
					}
				}
				return true
			})
			continue
		}
		if f.Doc != nil {
			s.doc[name] = f.Doc.Text()
		}
		for _, c := range f.Comments {
			if strings.Contains(c.Text(), "needs no Observe") {
				s.excused = true
			}
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && registersByHand(fn) {
				s.byHand = true
				if !explains(f, fn) {
					s.unexplained = append(s.unexplained, name+": "+fn.Name.Name)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "Wrote":
				s.records = true
			case "Observe", "ObserveAdd", "ObserveDelete":
				s.observes = true
			}
			switch id, _ := sel.X.(*ast.Ident); {
			case id != nil && id.Name == "wait" &&
				(strings.Contains(sel.Sel.Name, "Until") || sel.Sel.Name == "Forever"):
				s.loops = append(s.loops, name+": wait."+sel.Sel.Name)
			case sel.Sel.Name == "AlreadyRegisteredError",
				(sel.Sel.Name == "Register" || sel.Sel.Name == "MustRegister") &&
					(id == nil || id.Name != "collectors"):
				s.registers = append(s.registers, name+": "+sel.Sel.Name)
			}
			return true
		})
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				s.decls[name] = append(s.decls[name], funcName(decl))
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						s.decls[name] = append(s.decls[name], ts.Name.Name)
					}
				}
			}
		}
	}
	return s
}

// funcName is "Name" for a function and "(*T).Name" or "(T).Name" for a
// method.
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	switch r := d.Recv.List[0].Type.(type) {
	case *ast.StarExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			return "(*" + id.Name + ")." + d.Name.Name
		}
	case *ast.Ident:
		return "(" + r.Name + ")." + d.Name.Name
	}
	return d.Name.Name
}

// registersByHand reports whether fn calls an informer's AddEventHandler
// (or AddEventHandlerWith...).
func registersByHand(fn *ast.FuncDecl) bool {
	found := false
	ast.Inspect(fn, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok &&
			strings.HasPrefix(sel.Sel.Name, "AddEventHandler") {
			found = true
		}
		return !found
	})
	return found
}

// explains reports whether a comment of fn (its doc, or one inside it)
// names Loop.Watch.
func explains(f *ast.File, fn *ast.FuncDecl) bool {
	for _, c := range f.Comments {
		if c.Pos() >= fn.Pos() && c.End() <= fn.End() || c == fn.Doc {
			if strings.Contains(c.Text(), "Loop.Watch") {
				return true
			}
		}
	}
	return false
}
