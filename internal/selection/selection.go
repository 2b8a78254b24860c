// Package selection is kube-controller-manager's --controllers semantics
// over ctrlhost descriptors, for any program that selects controllers by
// name: the list is walked in order and the first entry naming a controller
// (name or -name, through an alias too) wins; otherwise "*" enables every
// controller that is not disabled by default.
//
// Guarantees: every entry that names no registered controller is reported,
// each in its own error listing the known names and aliases; aliases
// resolve to canonical names and keep a leading "-".
//
// Non-guarantees: empty entries are not rejected here (manager.Options
// validates the flag); feature gates and the cloud-provider rule are the
// caller's.
package selection

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Selection is a resolved --controllers list.
type Selection struct {
	entries []string // "*", "name" or "-name", canonical names only
}

// ErrUnknownController is matched (errors.Is) by Resolve's error when
// entries name no registered controller.
var ErrUnknownController = errors.New("is not a known controller")

// unknownError names every entry that names no registered controller, and
// the known ones, once.
type unknownError struct {
	unknown []string
	known   string
}

func (e unknownError) Error() string {
	quoted := make([]string, len(e.unknown))
	for i, u := range e.unknown {
		quoted[i] = strconv.Quote(u)
	}
	if len(quoted) == 1 {
		return fmt.Sprintf("--controllers: %s %v; known controllers: %s", quoted[0],
			ErrUnknownController, e.known)
	}
	return fmt.Sprintf("--controllers: %s are not known controllers; known controllers: %s",
		strings.Join(quoted, ", "), e.known)
}

func (e unknownError) Is(target error) bool { return target == ErrUnknownController }

// Resolve resolves entries against ds. ds need not be a valid registry
// (a caller reporting every problem at once still gets the --controllers
// ones): the first descriptor with a given name or alias answers for it.
// The error names every unknown entry, and the known controllers, once;
// the Selection is usable either way, with unknown entries left out. Empty
// entries are left out without an error: the callers report them, by
// position.
func Resolve(ds []descriptor.Descriptor, entries []string) (Selection, error) {
	out, err := resolve(ds, entries)
	return Selection{entries: out}, err
}

// Entries returns the resolved list.
func (s Selection) Entries() []string { return append([]string(nil), s.entries...) }

// resolve resolves aliases in a --controllers list, keeping a
// leading "-", and reports entries that name no registered controller.
//
// ds need not be a valid registry (Build reports --controllers problems even
// when the descriptors have problems of their own); the first descriptor
// with a given name or alias answers for it.
func resolve(ds []descriptor.Descriptor, entries []string) ([]string, error) {
	canonical := map[string]string{}
	var names []string
	aliases := map[string]string{}
	for _, d := range ds {
		if _, seen := canonical[d.Name()]; !seen && d.Name() != "" {
			canonical[d.Name()] = d.Name()
			names = append(names, d.Name())
		}
	}
	for _, d := range ds {
		for _, a := range d.Aliases() {
			if _, seen := canonical[a]; !seen {
				canonical[a] = d.Name()
				aliases[a] = d.Name()
			}
		}
	}
	out := make([]string, 0, len(entries))
	var unknown []string
	for _, e := range entries {
		switch e {
		case "*":
			out = append(out, e)
			continue
		case "":
			continue // its callers say which entry is empty
		}
		neg := strings.HasPrefix(e, "-")
		name, ok := canonical[strings.TrimPrefix(e, "-")]
		if !ok {
			unknown = append(unknown, strings.TrimPrefix(e, "-"))
			continue
		}
		if neg {
			name = "-" + name
		}
		out = append(out, name)
	}
	if len(unknown) == 0 {
		return out, nil
	}
	var alias []string
	for a, n := range aliases {
		alias = append(alias, a+"→"+n)
	}
	sort.Strings(alias)
	sort.Strings(names)
	known := strings.Join(names, ", ")
	if len(alias) > 0 {
		known += " (aliases: " + strings.Join(alias, ", ") + ")"
	}
	return out, unknownError{unknown: unknown, known: known}
}

// Enabled is KCM's rule: walk the list in order, the first entry naming the
// controller (or its negation) wins; otherwise "*" enables every controller
// not disabled by default.
func (s Selection) Enabled(d descriptor.Descriptor) bool {
	star := false
	for _, c := range s.entries {
		switch c {
		case d.Name():
			return true
		case "-" + d.Name():
			return false
		case "*":
			star = true
		}
	}
	return star && !d.IsDisabledByDefault()
}
