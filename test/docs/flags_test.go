package docs_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/controllers/builtin"
	"github.com/ctrlhost/ctrlhost/manager"
)

var update = flag.Bool("update", false, "rewrite docs/flags.md's generated tables")

// flagSets are docs/flags.md's generated tables, by region name.
func flagSets() map[string]*pflag.FlagSet {
	process := pflag.NewFlagSet("process", pflag.ContinueOnError)
	o := manager.NewOptions()
	o.AddProcessFlags(process)
	host := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o.AddManagerFlags(host, "")
	builtins := pflag.NewFlagSet("builtin", pflag.ContinueOnError)
	b := builtin.NewOptions()
	b.AddFlags(builtins)
	return map[string]*pflag.FlagSet{"process": process, "manager": host, "builtin": builtins}
}

// TestFlagsReference: docs/flags.md's tables are what the flag sets
// register (names, types, defaults, help), so the reference cannot drift
// from the code. Run with -update to rewrite them.
func TestFlagsReference(t *testing.T) {
	path := filepath.Join(root, "docs", "flags.md")
	text := read(t, path)
	want := text
	for name, fs := range flagSets() {
		var err error
		want, err = replaceRegion(want, name, flagTable(fs))
		if err != nil {
			t.Fatalf("docs/flags.md: %v", err)
		}
	}
	if want == text {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/flags.md's flag tables are not what the code registers; run\n" +
		"\tgo test ./test/docs -run TestFlagsReference -update")
}

// replaceRegion puts table between "<!-- flags:begin name -->" and the
// "<!-- flags:end -->" after it.
func replaceRegion(text, name, table string) (string, error) {
	begin := "<!-- flags:begin " + name + " -->\n"
	i := strings.Index(text, begin)
	if i < 0 {
		return "", fmt.Errorf("no %q line", strings.TrimSpace(begin))
	}
	i += len(begin)
	j := strings.Index(text[i:], "<!-- flags:end -->")
	if j < 0 {
		return "", fmt.Errorf("region %q has no <!-- flags:end --> line", name)
	}
	return text[:i] + table + text[i+j:], nil
}

// flagTable renders a flag set as a Markdown table, in name order.
func flagTable(fs *pflag.FlagSet) string {
	var b strings.Builder
	b.WriteString("| flag | default | what it does |\n|---|---|---|\n")
	fs.SortFlags = true
	fs.VisitAll(func(f *pflag.Flag) {
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		if typ := f.Value.Type(); typ != "bool" {
			name += " " + typ
		}
		def := f.DefValue
		switch def {
		case "", "[]", "false", "0", "0s":
			def = ""
		default:
			def = "`" + def + "`"
		}
		usage := strings.Join(strings.Fields(f.Usage), " ")
		usage = strings.ReplaceAll(usage, "|", `\|`)
		fmt.Fprintf(&b, "| %s | %s | %s |\n", name, def, usage)
	})
	return b.String()
}
