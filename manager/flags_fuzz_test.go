package manager_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
)

// fuzzDescriptors is the registry the flag fuzz targets build against: one
// controller with an alias, one plain, one disabled by default.
func fuzzDescriptors() []descriptor.Descriptor {
	return []descriptor.Descriptor{
		descriptor.New("alpha-controller", nop).WithAliases("alpha"),
		descriptor.New("beta-controller", nop),
		descriptor.New("gamma-controller", nop).DisabledByDefault(),
	}
}

// parseAndBuild parses args into fresh Options and builds a Manager from
// them over a fake clientset. A parse error is returned as parseErr and no
// build is attempted.
func parseAndBuild(args []string) (m *manager.Manager, o manager.Options, parseErr, buildErr error) {
	o = manager.NewOptions()
	fs := pflag.NewFlagSet("fuzz", pflag.ContinueOnError)
	fs.SetOutput(discardWriter{})
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, o, err, nil
	}
	m, err := manager.NewBuilder("fuzz-manager").
		WithClient(fake.NewClientset(), nil).
		WithLogger(logr.Discard()).
		Register(fuzzDescriptors()...).
		WithOptions(o).
		Build()
	return m, o, nil, err
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// FuzzControllersFlag parses an arbitrary --controllers value and builds a
// Manager with it. Invariants: no panic; a rejection names --controllers;
// an accepted value selects exactly what KCM's first-entry-wins rule says.
func FuzzControllersFlag(f *testing.F) {
	for _, s := range []string{
		"*", "", "-", "*,-alpha", "alpha,-alpha", "-alpha,alpha", "gamma-controller", "*,gamma",
		"nope", "-nope", " alpha", "alpha,,beta-controller", `"a,b"`, `"unterminated`, "*,*,-*",
		"ALPHA", "alpha\x00", "-beta-controller,*",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		m, o, parseErr, err := parseAndBuild([]string{"--controllers=" + value})
		if parseErr != nil {
			if !strings.Contains(parseErr.Error(), "controllers") {
				t.Fatalf("parse error does not name --controllers: %v", parseErr)
			}
			return
		}
		if err != nil {
			if !strings.Contains(err.Error(), "--controllers") {
				t.Fatalf("Build rejected --controllers=%q with an error that does not name the flag: %v", value, err)
			}
			for _, e := range o.Controllers {
				name := strings.TrimPrefix(e, "-")
				if e != "*" && strings.TrimSpace(e) != "" && e != "-" && !known(name) &&
					!strings.Contains(err.Error(), strconv.Quote(name)) {
					t.Fatalf("Build error does not name unknown entry %q: %v", name, err)
				}
			}
			return
		}
		canon := func(n string) string {
			if n == "alpha" {
				return "alpha-controller"
			}
			if n == "gamma" {
				return "gamma-controller"
			}
			return n
		}
		for _, d := range fuzzDescriptors() {
			want, decided := false, false
			star := false
			for _, e := range o.Controllers {
				if e == "*" {
					star = true
					continue
				}
				if canon(strings.TrimPrefix(e, "-")) == d.Name() {
					want, decided = !strings.HasPrefix(e, "-"), true
					break
				}
			}
			if !decided {
				want = star && !d.IsDisabledByDefault()
			}
			st, ok := m.Status(d.Name())
			if !ok {
				t.Fatalf("no status for %s", d.Name())
			}
			if got := st.Phase != manager.PhaseDisabled; got != want {
				t.Fatalf("--controllers=%q: %s selected=%v, want %v", value, d.Name(), got, want)
			}
		}
	})
}

func known(name string) bool {
	return slices.Contains([]string{"alpha-controller", "alpha", "beta-controller", "gamma-controller"}, name)
}

// FuzzFlagValue parses --<flag>=<value> for a flag picked from the FlagSet
// by index, then builds. Invariants: no panic; a parse error names the
// flag; a Build error names the flag or the value it was given.
func FuzzFlagValue(f *testing.F) {
	names := flagNames()
	seed := func(flag, value string) {
		f.Add(uint16(slices.Index(names, flag)), value)
	}
	seed("leader-elect-lease-duration", "1s")
	seed("leader-elect-renew-deadline", "-3s")
	seed("leader-elect-retry-period", "0")
	seed("leader-elect-lost-lease-policy", "sometimes")
	seed("leader-elect-resource-lock", "endpoints")
	seed("leader-elect-resource-name", "Not_A_Name")
	seed("leader-elect-resource-namespace", "")
	seed("controller-shutdown-timeout", "0s")
	seed("min-resync-period", "1h")
	seed("kube-api-qps", "-1")
	seed("kube-api-burst", "99999999999")
	seed("secure-port", "70000")
	seed("bind-address", "not-an-ip")
	seed("logging-format", "xml")
	seed("leader-migration-config", "/nonexistent")
	seed("enable-leader-migration", "maybe")
	seed("v", "-5")
	f.Fuzz(func(t *testing.T, idx uint16, value string) {
		flag := names[int(idx)%len(names)]
		_, _, parseErr, err := parseAndBuild([]string{"--" + flag + "=" + value})
		if parseErr != nil {
			if !strings.Contains(parseErr.Error(), flag) {
				t.Fatalf("--%s=%q: parse error does not name the flag: %v", flag, value, parseErr)
			}
			return
		}
		if err != nil && !namesFlagOrValue(err.Error(), flag, value) {
			t.Fatalf("--%s=%q: Build error names neither the flag nor the value: %v", flag, value, err)
		}
	})
}

// namesFlagOrValue reports whether msg points at the flag: by its name, its
// name with spaces for dashes (as "lease duration"), or the value given.
func namesFlagOrValue(msg, flag, value string) bool {
	lower := strings.ToLower(msg)
	if strings.Contains(msg, flag) || strings.Contains(lower, strings.ReplaceAll(flag, "-", " ")) {
		return true
	}
	return strings.TrimSpace(value) != "" && (strings.Contains(msg, value) || strings.Contains(msg, strconv.Quote(value)))
}

// flagNames lists every flag AddFlags defines, in the FlagSet's sorted order.
func flagNames() []string {
	o := manager.NewOptions()
	fs := pflag.NewFlagSet("names", pflag.ContinueOnError)
	o.AddFlags(fs)
	var names []string
	fs.VisitAll(func(fl *pflag.Flag) { names = append(names, fl.Name) })
	return names
}
