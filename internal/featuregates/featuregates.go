// Package featuregates is a Manager's side of --feature-gates: parsing
// the flag, setting it on the gate the program gave (WithFeatureGate), and
// keeping Managers that share one gate from flipping it under each other.
//
// Guarantees: an unknown gate is an error naming the flag and listing the
// gates the program knows; a gate that cannot be set says so; while a
// Manager runs (Claim), or is built and not run yet (SetShared), a Build
// of another Manager sharing its gate that would set one of its gates the
// other way fails naming both, and leaves the gate as it is.
//
// Non-guarantees: a gate set by code outside ctrlhost is not watched; a
// gate type that cannot be compared (not a pointer) is not tracked.
package featuregates

import (
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
)

// Apply sets --feature-gates on fg, which must then be mutable; errors
// name the flag and list the gates fg knows.
func Apply(fg featuregate.FeatureGate, gates map[string]bool) error {
	if len(gates) == 0 {
		return nil
	}
	mfg, ok := fg.(featuregate.MutableFeatureGate)
	if !ok {
		return fmt.Errorf(
			"--feature-gates: the gate passed to WithFeatureGate (%T) cannot be set; pass a "+
				"featuregate.MutableFeatureGate",
			fg,
		)
	}
	known := mfg.GetAll()
	var unknown []string
	for name := range gates {
		if _, ok := known[featuregate.Feature(name)]; !ok {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		names := make([]string, 0, len(known))
		for f := range known {
			names = append(names, string(f))
		}
		slices.Sort(names)
		return fmt.Errorf(
			"--feature-gates: unknown gate(s) %s; this program knows: %s",
			strings.Join(unknown, ", "),
			strings.Join(names, ", "),
		)
	}
	if err := mfg.SetFromMap(maps.Clone(gates)); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	return nil
}

// shared records, per feature gate given to WithFeatureGate, the
// --feature-gates of the Managers that share it: those whose Run is in
// progress (Claim), and those built and not run yet (SetShared), so that
// Managers sharing one gate (one process, one gate) cannot flip a gate
// under each other, whether the other runs already or is only built.
var shared = struct {
	mu     sync.Mutex
	claims map[featuregate.FeatureGate][]*gateClaim
}{claims: map[featuregate.FeatureGate][]*gateClaim{}}

// gateClaim is one Manager's settings of a shared gate.
type gateClaim struct {
	component string
	gates     map[string]bool
	// holds, for a Manager built and not run yet, reports whether it may
	// still run with its settings (false once its Run started, or once the
	// program dropped it); nil for a running Manager, whose claim holds
	// until released.
	holds func() bool
}

func (c *gateClaim) describe(setting string) string {
	if c.holds != nil {
		return "built on the same gate, set " + setting
	}
	return "runs with " + setting + " on the same gate"
}

// shareable reports whether fg can be told apart from other gates (a
// pointer, as featuregate.NewFeatureGate's), and gates sets something.
func shareable(fg featuregate.FeatureGate, gates map[string]bool) bool {
	return fg != nil && len(gates) > 0 && reflect.TypeOf(fg).Comparable()
}

// conflictsLocked names the settings of gates that another Manager
// sharing fg set the other way; shared.mu is held. Built claims that no
// longer hold are forgotten first; before it reports one, it collects the
// garbage once, so that a Manager the program dropped unrun (a test's, a
// failed attempt's) does not count however recently it went: a conflict
// is an error path, and its answer must not depend on when the collector
// last ran.
func conflictsLocked(fg featuregate.FeatureGate, gates map[string]bool) error {
	var conflicts []string
	for collected := false; ; collected = true {
		shared.claims[fg] = slices.DeleteFunc(shared.claims[fg], func(c *gateClaim) bool {
			return c.holds != nil && !c.holds()
		})
		if len(shared.claims[fg]) == 0 {
			delete(shared.claims, fg)
		}
		conflicts = conflicts[:0]
		for _, c := range shared.claims[fg] {
			for _, name := range slices.Sorted(maps.Keys(gates)) {
				if on, ok := c.gates[name]; ok && on != gates[name] {
					conflicts = append(conflicts, fmt.Sprintf("%s=%v (manager %q %s)",
						name, gates[name], c.component, c.describe(fmt.Sprintf("%s=%v", name, on))))
				}
			}
		}
		if len(conflicts) == 0 {
			return nil
		}
		if collected || !slices.ContainsFunc(shared.claims[fg], func(c *gateClaim) bool {
			return c.holds != nil
		}) {
			break
		}
		runtime.GC()
	}
	return fmt.Errorf("--feature-gates: %s; Managers that share a feature gate must agree on "+
		"it: give them the same --feature-gates (Options.ShareProcess copies the process's), "+
		"or each a gate of its own (WithFeatureGate)", strings.Join(conflicts, ", "))
}

// Check is Build's check, for a Build that will not set gates (it failed
// for another reason): gates must not flip a gate another Manager sharing
// fg set the other way.
func Check(fg featuregate.FeatureGate, gates map[string]bool) error {
	if !shareable(fg, gates) {
		return nil
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return conflictsLocked(fg, gates)
}

// SetShared is Build's: unless gates flip a gate another Manager sharing
// fg set the other way (then fg is left as it is, and the error names the
// flag, both settings and what to do), it sets gates on fg (Apply) and
// records them for component until holds reports false (its Run started,
// or the program dropped it). Two Builds at once cannot both pass: the
// check and the change are made under one lock.
func SetShared(fg featuregate.FeatureGate, gates map[string]bool, component string,
	holds func() bool) error {
	if !shareable(fg, gates) {
		return Apply(fg, gates)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if err := conflictsLocked(fg, gates); err != nil {
		return err
	}
	if err := Apply(fg, gates); err != nil {
		return err
	}
	shared.claims[fg] = append(shared.claims[fg],
		&gateClaim{component: component, gates: maps.Clone(gates), holds: holds})
	return nil
}

// Claim is Run's: the gate must still say what this Manager's Build set,
// and no other Manager sharing it may say otherwise; then the claim holds
// until release.
func Claim(fg featuregate.FeatureGate, gates map[string]bool,
	component string) (release func(), err error) {
	if !shareable(fg, gates) {
		return func() {}, nil
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if err := conflictsLocked(fg, gates); err != nil {
		return nil, err
	}
	var changed []string
	for _, name := range slices.Sorted(maps.Keys(gates)) {
		if fg.Enabled(featuregate.Feature(name)) != gates[name] {
			changed = append(changed, fmt.Sprintf("%s=%v", name, gates[name]))
		}
	}
	if len(changed) > 0 {
		return nil, fmt.Errorf("--feature-gates: %s no longer holds on the shared feature gate: "+
			"it was set otherwise after this Manager's Build; give Managers that share a gate "+
			"the same settings", strings.Join(changed, ", "))
	}
	c := &gateClaim{component: component, gates: maps.Clone(gates)}
	shared.claims[fg] = append(shared.claims[fg], c)
	return func() {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		shared.claims[fg] = slices.DeleteFunc(shared.claims[fg],
			func(o *gateClaim) bool { return o == c })
		if len(shared.claims[fg]) == 0 {
			delete(shared.claims, fg)
		}
	}, nil
}

// Value is --feature-gates bound to m: comma-separated Name=true|false
// pairs, later ones winning, as KCM parses them.
func Value(m *map[string]bool) pflag.Value { return gatesValue{m} }

// gatesValue is Value.
type gatesValue struct{ m *map[string]bool }

func (v gatesValue) Type() string { return "mapStringBool" }

func (v gatesValue) String() string {
	if v.m == nil || len(*v.m) == 0 {
		return ""
	}
	pairs := make([]string, 0, len(*v.m))
	for _, k := range slices.Sorted(maps.Keys(*v.m)) {
		pairs = append(pairs, k+"="+strconv.FormatBool((*v.m)[k]))
	}
	return strings.Join(pairs, ",")
}

func (v gatesValue) Set(s string) error {
	if *v.m == nil {
		*v.m = map[string]bool{}
	}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("%q: want Name=true or Name=false", pair)
		}
		b, err := strconv.ParseBool(strings.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("%q: %q is not a boolean", pair, val)
		}
		(*v.m)[strings.TrimSpace(k)] = b
	}
	return nil
}
