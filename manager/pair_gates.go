package manager

import (
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"weak"

	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/internal/featuregates"
)

// builtGates records, per feature gate given to WithFeatureGate, what the
// --feature-gates of the Managers built on it and not yet run set. A
// program with two Managers sharing one gate (one process, one gate)
// builds both before it runs either: the second Build must see what the
// first set, since no claim of a running Manager (featuregates.Claim)
// exists yet. A Manager whose Run has started is featuregates' to watch
// from then on; one that was dropped unrun will never run, and holds
// nothing either (the record points at it weakly).
var builtGates = struct {
	mu     sync.Mutex
	claims map[featuregate.FeatureGate][]builtClaim
}{claims: map[featuregate.FeatureGate][]builtClaim{}}

// builtClaim is what one built Manager set on a shared gate.
type builtClaim struct {
	component string
	gates     map[string]bool
	m         weak.Pointer[Manager]
}

// holds reports whether c's Manager may still run with its setting: it
// has not been reclaimed and its Run has not started.
func (c builtClaim) holds() bool {
	m := c.m.Value()
	return m != nil && !m.ran.Load()
}

// setSharedGate sets gates, m's --feature-gates, on given, the caller's
// gate, once Build found nothing else wrong (apply), unless they flip a
// gate that another Manager sharing it set the other way: one built and
// not yet run, or one running. Then given is left as it is, and the error
// names the flag, both settings and what to do. Two Builds at once cannot
// both pass: the check and the change are made under one lock.
func setSharedGate(given featuregate.FeatureGate, gates map[string]bool, m *Manager,
	apply bool) error {
	if len(gates) == 0 {
		return nil
	}
	// A gate that is no pointer cannot be told apart from another one
	// (featuregates' rule too): it is set, but not tracked.
	tracked := given != nil && reflect.TypeOf(given).Comparable()
	builtGates.mu.Lock()
	defer builtGates.mu.Unlock()
	if tracked {
		if err := builtConflicts(given, gates); err != nil {
			return err
		}
	}
	if err := featuregates.Check(given, gates); err != nil {
		return err
	}
	if !apply {
		return nil
	}
	if err := featuregates.Apply(given, gates); err != nil {
		return err
	}
	if tracked {
		builtGates.claims[given] = append(builtGates.claims[given],
			builtClaim{component: m.component, gates: maps.Clone(gates), m: weak.Make(m)})
	}
	return nil
}

// builtConflicts names the settings of gates that a Manager built on fg
// and not yet run set the other way; builtGates.mu is held. Before it
// reports one it collects the garbage, once, so that a Manager the
// program dropped (a test's, a failed attempt's) does not count: a
// conflict is an error path, and its answer must not depend on when the
// collector last ran.
func builtConflicts(fg featuregate.FeatureGate, gates map[string]bool) error {
	var conflicts []string
	for collected := false; ; collected = true {
		pruneBuiltGates()
		conflicts = conflicts[:0]
		for _, c := range builtGates.claims[fg] {
			for _, name := range slices.Sorted(maps.Keys(gates)) {
				if on, ok := c.gates[name]; ok && on != gates[name] {
					conflicts = append(conflicts, fmt.Sprintf("%s=%v (manager %q, built on "+
						"the same gate, set %s=%v)", name, gates[name], c.component, name, on))
				}
			}
		}
		if len(conflicts) == 0 {
			return nil
		}
		if collected {
			break
		}
		runtime.GC()
	}
	return fmt.Errorf("--feature-gates: %s; Managers that share a feature gate must agree on "+
		"it: give them the same --feature-gates (Options.ShareProcess copies the process's), "+
		"or each a gate of its own (WithFeatureGate)", strings.Join(conflicts, ", "))
}

// pruneBuiltGates forgets the claims that no longer hold, on every gate,
// and the gates left without one; builtGates.mu is held.
func pruneBuiltGates() {
	for fg, cs := range builtGates.claims {
		cs = slices.DeleteFunc(cs, func(c builtClaim) bool { return !c.holds() })
		if len(cs) == 0 {
			delete(builtGates.claims, fg)
		} else {
			builtGates.claims[fg] = cs
		}
	}
}
