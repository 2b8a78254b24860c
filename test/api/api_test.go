package api_test

import (
	"flag"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ctrlhost/ctrlhost/test/api"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var update = flag.Bool("update", false, "rewrite the api/*.txt files from the source")

// root is the repository's root directory.
func root(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// modules are the modules whose public API is recorded, each in
// api/<file>.txt.
func modules(dir string) map[string]api.Module {
	const path = "github.com/ctrlhost/ctrlhost"
	return map[string]api.Module{
		"ctrlhost": {Dir: dir, Path: path,
			Skip: []string{"upstream", "cloud", "test", "examples", "hack", "cmd", "deploy", "docs", "api"}},
		"upstream": {Dir: filepath.Join(dir, "upstream"), Path: path + "/upstream",
			Skip: []string{"cmd", "test", "bench", "differential"}},
		"cloud": {Dir: filepath.Join(dir, "cloud"), Path: path + "/cloud",
			Skip: []string{"examples", "test"}},
	}
}

// TestAPIIsRecorded: the exported API of every public package is the one
// recorded in api/<module>.txt. A change to the public surface must come
// with the file (make api) and a CHANGELOG.md entry.
func TestAPIIsRecorded(t *testing.T) {
	dir := root(t)
	for name, m := range modules(dir) {
		t.Run(name, func(t *testing.T) {
			got, err := api.Lines(m)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "api", name+".txt")
			if *update {
				if err := api.Write(file, got); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: %d lines, %d identifiers", file, len(got), api.Count(got))
				return
			}
			want, err := api.Read(file)
			if err != nil {
				t.Fatalf("%v; run make api to record the API", err)
			}
			var added, removed []string
			for _, l := range got {
				if _, ok := slices.BinarySearch(want, l); !ok {
					added = append(added, "+"+l)
				}
			}
			for _, l := range want {
				if _, ok := slices.BinarySearch(got, l); !ok {
					removed = append(removed, "-"+l)
				}
			}
			if len(added)+len(removed) > 0 {
				t.Errorf("the exported API differs from api/%s.txt:\n%s\n"+
					"If the change is meant, run make api and note it in CHANGELOG.md.",
					name, strings.Join(append(removed, added...), "\n"))
			}
		})
	}
}

// TestLines: every kind of exported declaration gets its line, with types
// only (no parameter names, no values); unexported names and methods do
// not appear.
func TestLines(t *testing.T) {
	got, err := api.Lines(api.Module{Dir: filepath.Join("testdata", "sample"), Path: "example.com/sample"})
	if err != nil {
		t.Fatal(err)
	}
	const p = "pkg example.com/sample, "
	want := []string{
		p + "const A",
		p + "const B int64",
		p + "const KindA Kind",
		p + "const KindB",
		p + "func New(string, ...int) *T",
		p + "method (*T) Do(context.Context) error",
		p + "type Alias = T",
		p + "type I interface",
		p + "type I interface, Run(context.Context) error",
		p + "type I interface, embedded io.Closer",
		p + "type Kind int",
		p + "type List[E any] struct",
		p + "type List[E any] struct, Items []E",
		p + "type T struct",
		p + "type T struct, Fn func(context.Context, int) error",
		p + "type T struct, Name string",
		p + "type T struct, embedded io.Reader",
		p + "var V",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := api.Count(got); n != 12 {
		t.Errorf("Count = %d, want 12 (fields and interface methods are not counted)", n)
	}
}
