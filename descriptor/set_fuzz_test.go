package descriptor_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

func fuzzInit(
	context.Context,
	descriptor.Context,
) (descriptor.Controller, error) {
	return nil, nil
}

// FuzzNewSet registers two descriptors with fuzzed names and aliases.
// Invariants: no panic; a rejection quotes an offending name or alias; an
// accepted Set resolves every name and alias to its owner.
func FuzzNewSet(f *testing.F) {
	f.Add("a-controller", "a", "b-controller", "b")
	f.Add("a-controller", "b-controller", "b-controller", "")
	f.Add("", "", "", "")
	f.Add("same", "x", "same", "x")
	f.Add("Upper", "with space", "dot.ted", "-lead")
	f.Add("a", "a", "b", "a")
	f.Add(strings.Repeat("n", 254), "ok", "ünï", "\x00")
	f.Fuzz(func(t *testing.T, n1, a1, n2, a2 string) {
		var aliases1, aliases2 []string
		if a1 != "" {
			aliases1 = []string{a1}
		}
		if a2 != "" {
			aliases2 = []string{a2}
		}
		s, err := descriptor.NewSet(
			descriptor.New(n1, fuzzInit).WithAliases(aliases1...),
			descriptor.New(n2, fuzzInit).WithAliases(aliases2...),
		)
		if err != nil {
			msg := err.Error()
			named := false
			for _, in := range []string{n1, a1, n2, a2} {
				if strings.Contains(msg, strconv.Quote(in)) {
					named = true
				}
			}
			if !named {
				t.Fatalf(
					"NewSet(%q %q, %q %q) rejected with an error naming no input: %v",
					n1,
					a1,
					n2,
					a2,
					err,
				)
			}
			return
		}
		for _, c := range []struct{ name, alias string }{{n1, a1}, {n2, a2}} {
			if got, ok := s.Canonical(c.name); !ok || got != c.name {
				t.Fatalf("Canonical(%q) = %q, %v", c.name, got, ok)
			}
			if c.alias == "" {
				continue
			}
			if got, ok := s.Canonical(c.alias); !ok || got != c.name {
				t.Fatalf("Canonical(alias %q) = %q, %v; want %q", c.alias, got, ok, c.name)
			}
		}
	})
}
