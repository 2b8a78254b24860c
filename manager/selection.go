package manager

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// canonicalControllers resolves aliases in a --controllers list, keeping a
// leading "-", and reports entries that name no registered controller.
//
// ds need not be a valid registry (Build reports --controllers problems even
// when the descriptors have problems of their own); the first descriptor
// with a given name or alias answers for it.
func canonicalControllers(ds []descriptor.Descriptor, entries []string) ([]string, []error) {
	canonical := map[string]string{}
	var names []string
	aliases := map[string]string{}
	for _, d := range ds {
		if _, seen := canonical[d.Name()]; !seen {
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
		if e == "*" {
			out = append(out, e)
			continue
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
	errs := make([]error, 0, len(unknown))
	for _, u := range unknown {
		errs = append(errs, fmt.Errorf("--controllers: %q is not a known controller; known controllers: %s", u, known))
	}
	return out, errs
}

// enabled is KCM's rule: walk the list in order, the first entry naming the
// controller (or its negation) wins; otherwise "*" enables every controller
// not disabled by default. The list must hold canonical names.
func enabled(d descriptor.Descriptor, controllers []string) bool {
	star := false
	for _, c := range controllers {
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

// skipReason says why an enabled controller must not run here, or "" if it
// may. An error means the feature gate could not answer (an unregistered
// feature makes component-base's gate panic).
func skipReason(d descriptor.Descriptor, fg featuregate.FeatureGate, cloudLoops bool) (reason string, err error) {
	if d.IsCloudProvider() && !cloudLoops {
		return "cloud-provider loop, and --cloud-provider is empty or \"external\"", nil
	}
	for _, g := range d.FeatureGates() {
		on, err := gateEnabled(fg, g)
		if err != nil {
			return "", fmt.Errorf("controller %q: feature gate %q: %w; register it in the gate passed to WithFeatureGate", d.Name(), g, err)
		}
		if !on {
			return fmt.Sprintf("feature gate %s is disabled", g), nil
		}
	}
	return "", nil
}

func gateEnabled(fg featuregate.FeatureGate, g featuregate.Feature) (on bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return fg.Enabled(g), nil
}

// includesCloudLoops is KCM's old rule: cloud loops run in-process only for
// a named, non-external provider.
func includesCloudLoops(provider string) bool {
	return provider != "" && provider != "external"
}
