package manager

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestFlagSectionsHoldAddFlagsFlags: AddFlagSections puts every flag
// AddFlags adds, with the same name, type, default and help, in exactly
// one section, each listed by name (a new flag must be given one).
func TestFlagSectionsHoldAddFlagsFlags(t *testing.T) {
	plain := NewOptions()
	fs := pflag.NewFlagSet("plain", pflag.ContinueOnError)
	plain.AddFlags(fs)
	sectioned := NewOptions()
	var s FlagSections
	sectioned.AddFlagSections(&s)
	seen := map[string]string{}
	for _, name := range s.Order {
		s.FlagSets[name].VisitAll(func(f *pflag.Flag) {
			if other, ok := seen[f.Name]; ok {
				t.Errorf("--%s is in sections %q and %q", f.Name, other, name)
			}
			seen[f.Name] = name
		})
	}
	logging := loggingFlags()
	fs.VisitAll(func(f *pflag.Flag) {
		if _, ok := flagSection(f.Name, logging); !ok {
			t.Errorf("--%s is in no section: list it in flagSectionNames", f.Name)
		}
		section, ok := seen[f.Name]
		if !ok {
			t.Errorf("--%s: AddFlags adds it, AddFlagSections does not", f.Name)
			return
		}
		g := s.FlagSets[section].Lookup(f.Name)
		if g.Usage != f.Usage || g.DefValue != f.DefValue || g.Value.Type() != f.Value.Type() ||
			g.Shorthand != f.Shorthand {
			t.Errorf("--%s differs in section %q: %+v, AddFlags: %+v", f.Name, section, g, f)
		}
		delete(seen, f.Name)
	})
	for name := range seen {
		t.Errorf("--%s: AddFlagSections adds it, AddFlags does not", name)
	}
	for name := range flagSectionNames {
		if !slices.Contains(flagSectionOrder, name) {
			t.Errorf("section %q is not in flagSectionOrder", name)
		}
	}
}

// TestTwoManagersHelpInSections: a program with two Managers shows the
// process's flags and the unprefixed Manager's in KCM's sections, and the
// other's in sections of its own named with its prefix; the flags parse
// as AddProcessFlags and AddManagerFlags' do.
func TestTwoManagersHelpInSections(t *testing.T) {
	proc, kcm, janitor := NewOptions(), NewOptions(), NewOptions()
	var s FlagSections
	proc.AddProcessFlagSections(&s)
	kcm.AddManagerFlagSections(&s, "")
	janitor.AddManagerFlagSections(&s, "janitor-")
	want := []string{"generic", "logs", "misc", "leader election", "leader-migration",
		"sharding", "secure serving", "authentication", "authorization", "debugging",
		"generic (--janitor-*)", "leader election (--janitor-*)",
		"leader-migration (--janitor-*)", "sharding (--janitor-*)",
		"secure serving (--janitor-*)", "authentication (--janitor-*)",
		"authorization (--janitor-*)", "debugging (--janitor-*)"}
	if !slices.Equal(s.Order, want) {
		t.Errorf("sections %q, want %q", s.Order, want)
	}
	fs := pflag.NewFlagSet("pair", pflag.ContinueOnError)
	s.AddTo(fs)
	if err := fs.Parse([]string{"--kubeconfig=/k", "-v=2", "--controllers=a",
		"--janitor-controllers=b", "--janitor-leader-elect=false"}); err != nil {
		t.Fatal(err)
	}
	if proc.Kubeconfig != "/k" || proc.Logging.Verbosity != 2 ||
		!slices.Equal(kcm.Controllers, []string{"a"}) ||
		!slices.Equal(janitor.Controllers, []string{"b"}) || janitor.LeaderElect ||
		!kcm.LeaderElect {
		t.Errorf("parsed: process %+v, kcm %+v, janitor %+v", proc, kcm, janitor)
	}
	if janitor.flagPrefix != "janitor-" || kcm.flagPrefix != "" {
		t.Errorf("prefixes remembered: kcm %q, janitor %q", kcm.flagPrefix, janitor.flagPrefix)
	}
	var help strings.Builder
	s.Print(&help, 100)
	for _, want := range []string{"\nGeneric flags:\n\n",
		"\nLeader election (--janitor-*) flags:\n\n",
		"--janitor-leader-elect-renew-deadline duration", "\nMisc flags:\n\n      --kubeconfig"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, help.String())
		}
	}
}
