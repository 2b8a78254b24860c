package selection

import (
	"fmt"

	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// Skip says why a selected controller must not run here, or "" if it may:
// it is a cloud loop that cloud does not run, or one of its feature gates
// is off. An error means the feature gate could not answer (an
// unregistered feature makes component-base's gate panic).
func Skip(d descriptor.Descriptor, fg featuregate.FeatureGate, cloud Cloud) (reason string,
	err error) {
	if d.IsCloudProvider() {
		if reason := cloud.skip(); reason != "" {
			return reason, nil
		}
	}
	for _, g := range d.FeatureGates() {
		on, err := gateEnabled(fg, g)
		if err != nil {
			return "", fmt.Errorf("controller %q: feature gate %q: %w; register it in the gate "+
				"passed to WithFeatureGate", d.Name(), g, err)
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

// Cloud decides whether descriptors marked CloudProvider() run.
type Cloud struct {
	InProcess bool   // the program runs a cloud provider in-process
	Provider  string // --cloud-provider
}

// skip says why cloud loops do not run here, or "" if they do.
func (c Cloud) skip() string {
	switch {
	case !c.InProcess:
		return "cloud-provider loop; this program runs no in-process cloud provider (built-in " +
			"providers are disabled since v1.31; a cloud-controller-manager runs it)"
	case !IncludesCloudLoops(c.Provider):
		return "cloud-provider loop, and --cloud-provider is empty or \"external\""
	}
	return ""
}

// IncludesCloudLoops is KCM's rule from before v1.31: cloud loops run
// in-process only for a named, non-external provider.
func IncludesCloudLoops(provider string) bool {
	return provider != "" && provider != "external"
}
