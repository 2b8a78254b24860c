// Package featuregates is a Manager's side of --feature-gates: parsing
// the flag, setting it on the gate the program gave (WithFeatureGate), and
// keeping Managers that share one gate from flipping it under each other.
//
// Guarantees: an unknown gate is an error naming the flag and listing the
// gates the program knows; a gate that cannot be set says so; while a
// Manager runs (Claim), a Build of another Manager sharing its gate that
// would set one of its gates the other way fails naming both (Check).
//
// Non-guarantees: a gate set by code outside ctrlhost is not watched; a
// gate type that cannot be compared (not a pointer) is not tracked.
package featuregates

import (
	"fmt"
	"maps"
	"reflect"
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
		return fmt.Errorf("--feature-gates: the gate passed to WithFeatureGate (%T) cannot be set; pass a featuregate.MutableFeatureGate", fg)
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
		return fmt.Errorf("--feature-gates: unknown gate(s) %s; this program knows: %s", strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	if err := mfg.SetFromMap(maps.Clone(gates)); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	return nil
}

// runningGates records, per feature gate given to WithFeatureGate, the
// --feature-gates of the Managers whose Run is in progress, so that
// Managers sharing one gate (one process, one gate) cannot flip a gate
// under each other's controllers.
var runningGates = struct {
	mu     sync.Mutex
	claims map[featuregate.FeatureGate][]*gateClaim
}{claims: map[featuregate.FeatureGate][]*gateClaim{}}

// gateClaim is one running Manager's settings of a shared gate.
type gateClaim struct {
	component string
	gates     map[string]bool
}

// shareable reports whether fg can be told apart from other gates (a
// pointer, as featuregate.NewFeatureGate's), and gates sets something.
func shareable(fg featuregate.FeatureGate, gates map[string]bool) bool {
	return fg != nil && len(gates) > 0 && reflect.TypeOf(fg).Comparable()
}

// gateConflicts names the settings of gates that a running Manager sharing
// fg set the other way; runningGates.mu is held.
func gateConflicts(fg featuregate.FeatureGate, gates map[string]bool) error {
	var conflicts []string
	for _, c := range runningGates.claims[fg] {
		for _, name := range slices.Sorted(maps.Keys(gates)) {
			if on, ok := c.gates[name]; ok && on != gates[name] {
				conflicts = append(conflicts, fmt.Sprintf("%s=%v (manager %q runs with "+
					"%s=%v on the same gate)", name, gates[name], c.component, name, on))
			}
		}
	}
	if len(conflicts) == 0 {
		return nil
	}
	return fmt.Errorf("--feature-gates: %s; Managers that share a feature gate must agree on "+
		"it: give them the same setting, or each a gate of its own (WithFeatureGate)",
		strings.Join(conflicts, ", "))
}

// Check is Build's check: gates must not flip a gate a running Manager
// sharing fg set the other way.
func Check(fg featuregate.FeatureGate, gates map[string]bool) error {
	if !shareable(fg, gates) {
		return nil
	}
	runningGates.mu.Lock()
	defer runningGates.mu.Unlock()
	return gateConflicts(fg, gates)
}

// Claim is Run's: the gate must still say what this Manager's Build set,
// and no running Manager sharing it may say otherwise; then the claim
// holds until release.
func Claim(fg featuregate.FeatureGate, gates map[string]bool,
	component string) (release func(), err error) {
	if !shareable(fg, gates) {
		return func() {}, nil
	}
	runningGates.mu.Lock()
	defer runningGates.mu.Unlock()
	if err := gateConflicts(fg, gates); err != nil {
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
			"another Build set it otherwise after this Manager's; give Managers that share a gate "+
			"the same settings", strings.Join(changed, ", "))
	}
	c := &gateClaim{component, maps.Clone(gates)}
	runningGates.claims[fg] = append(runningGates.claims[fg], c)
	return func() {
		runningGates.mu.Lock()
		defer runningGates.mu.Unlock()
		runningGates.claims[fg] = slices.DeleteFunc(runningGates.claims[fg],
			func(o *gateClaim) bool { return o == c })
		if len(runningGates.claims[fg]) == 0 {
			delete(runningGates.claims, fg)
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
