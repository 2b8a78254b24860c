package descriptor

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ctrlhost/ctrlhost/shard"
)

// Set is a validated registry of descriptors: canonical names and aliases are
// unique across it. It is immutable and safe for concurrent use.
type Set struct {
	ordered []Descriptor          // registration order
	byName  map[string]Descriptor // canonical name → descriptor
	alias   map[string]string     // alias → canonical name
}

// NewSet validates ds and returns them as a Set. The error joins every
// problem found, each naming the descriptor it concerns: an empty or invalid
// name, a nil InitFunc, a name registered twice, an alias that repeats, an
// alias equal to a canonical name, an empty feature gate, an error from a
// WithValidator function.
func NewSet(ds ...Descriptor) (*Set, error) {
	s := &Set{byName: map[string]Descriptor{}, alias: map[string]string{}}
	var errs []error
	for i, d := range ds {
		label := fmt.Sprintf("descriptor %q", d.name)
		nameErr := validName(d.name)
		if nameErr != nil {
			label = fmt.Sprintf("descriptor #%d", i+1)
			errs = append(errs, fmt.Errorf("%s: name %q: %w", label, d.name, nameErr))
		}
		if d.init == nil {
			errs = append(
				errs,
				fmt.Errorf("%s: InitFunc is nil; pass a function to descriptor.New", label),
			)
		}
		for _, g := range d.featureGates {
			if g == "" {
				errs = append(errs, fmt.Errorf("%s: empty feature gate in WithFeatureGates", label))
			}
		}
		for _, v := range d.validators {
			if v == nil {
				errs = append(errs, fmt.Errorf("%s: nil validator in WithValidator", label))
			} else if err := v(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", label, err))
			}
		}
		if d.sharded {
			switch {
			case d.noLeaderElection:
				errs = append(
					errs,
					fmt.Errorf(
						"%s: Sharded and WithoutLeaderElection exclude each other: a sharded controller runs under "+
							"its slots' Leases; drop one",
						label,
					),
				)
			case d.startFirst:
				errs = append(
					errs,
					fmt.Errorf(
						"%s: Sharded and StartFirst exclude each other: a sharded controller starts in its slots' "+
							"terms, not before the main term's controllers; drop one",
						label,
					),
				)
			}
			if err := (shard.Space{Slots: 1, Keying: d.keying}).Validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: Sharded: %w", label, err))
			}
		}
		if len(d.served) > 0 && d.startFirst {
			errs = append(errs, fmt.Errorf("%s: WhenServed and StartFirst exclude each other: "+
				"a StartFirst controller runs before every other InitFunc of its term, "+
				"and one that waits for its resources cannot; drop one", label))
		}
		for _, gvr := range d.served {
			if gvr.Version == "" || gvr.Resource == "" {
				errs = append(errs, fmt.Errorf("%s: WhenServed(%q): a resource needs a "+
					"version and a resource name, such as {Group: \"example.com\", "+
					"Version: \"v1\", Resource: \"widgets\"}", label, gvr.String()))
			}
		}
		seen := map[string]bool{}
		for _, a := range d.aliases {
			if err := validName(a); err != nil {
				errs = append(errs, fmt.Errorf("%s: alias %q: %w", label, a, err))
			} else if seen[a] {
				errs = append(errs, fmt.Errorf("%s: alias %q repeated", label, a))
			}
			seen[a] = true
		}
		if nameErr != nil {
			continue
		}
		if _, dup := s.byName[d.name]; dup {
			errs = append(
				errs,
				fmt.Errorf(
					"%s: registered twice; each canonical name must be registered once",
					label,
				),
			)
			continue
		}
		s.byName[d.name] = d
		s.ordered = append(s.ordered, d)
	}
	// Collisions are checked once every canonical name is known, so that an
	// alias equal to a name registered later is caught too.
	for _, d := range s.ordered {
		for _, a := range d.aliases {
			if validName(a) != nil {
				continue // reported above
			}
			if _, isName := s.byName[a]; isName {
				errs = append(
					errs,
					fmt.Errorf(
						"descriptor %q: alias %q is the canonical name of a registered controller",
						d.name,
						a,
					),
				)
				continue
			}
			if owner, dup := s.alias[a]; dup && owner != d.name {
				errs = append(
					errs,
					fmt.Errorf(
						"descriptor %q: alias %q is already an alias of %q",
						d.name,
						a,
						owner,
					),
				)
				continue
			}
			s.alias[a] = d.name
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

func validName(n string) error {
	if n == "" {
		return errors.New("must not be empty")
	}
	if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
		return fmt.Errorf(
			"must be a lowercase DNS-1123 name, as it names health checks, URL "+
				"paths and service accounts: %s",
			strings.Join(msgs, "; "),
		)
	}
	return nil
}

// All returns the descriptors in registration order.
func (s *Set) All() []Descriptor { return slices.Clone(s.ordered) }

// Get returns the descriptor whose canonical name or alias is name.
func (s *Set) Get(name string) (Descriptor, bool) {
	if c, ok := s.alias[name]; ok {
		name = c
	}
	d, ok := s.byName[name]
	return d, ok
}

// Canonical resolves an alias to its canonical name; a canonical name resolves
// to itself.
func (s *Set) Canonical(name string) (string, bool) {
	d, ok := s.Get(name)
	return d.name, ok
}

// Names returns every canonical name, sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.byName))
	for n := range s.byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Aliases returns a copy of the alias → canonical name map.
func (s *Set) Aliases() map[string]string {
	out := make(map[string]string, len(s.alias))
	for a, n := range s.alias {
		out[a] = n
	}
	return out
}

// DisabledByDefault returns the canonical names of the disabled-by-default
// descriptors, sorted.
func (s *Set) DisabledByDefault() []string {
	var out []string
	for n, d := range s.byName {
		if d.disabledByDefault {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
