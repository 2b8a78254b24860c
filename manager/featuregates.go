package manager

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/component-base/featuregate"
)

// applyFeatureGates sets --feature-gates on fg, which must then be
// mutable; errors name the flag and list the gates fg knows.
func applyFeatureGates(fg featuregate.FeatureGate, gates map[string]bool) error {
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

// gatesValue parses --feature-gates: comma-separated Name=true|false pairs,
// later ones winning, as KCM.
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
