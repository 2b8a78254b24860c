package manager

import (
	"fmt"

	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

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
