package manager

import (
	"fmt"

	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/selection"
)

// ErrUnknownController is wrapped by Build's error for each --controllers
// entry (Options.Controllers) that names no registered controller, name or
// alias; the error lists the known names.
var ErrUnknownController = selection.ErrUnknownController

// skipReason says why an enabled controller must not run here, or "" if it
// may. An error means the feature gate could not answer (an unregistered
// feature makes component-base's gate panic).
func skipReason(d descriptor.Descriptor, fg featuregate.FeatureGate, cloud cloudLoops) (reason string, err error) {
	if d.IsCloudProvider() {
		if reason := cloud.skip(); reason != "" {
			return reason, nil
		}
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

// cloudLoops decides whether descriptors marked CloudProvider() run.
type cloudLoops struct {
	inProcess bool   // Builder.WithInProcessCloudProvider
	provider  string // --cloud-provider
}

// skip says why cloud loops do not run here, or "" if they do.
func (c cloudLoops) skip() string {
	switch {
	case !c.inProcess:
		return "cloud-provider loop; this program runs no in-process cloud provider (built-in providers are disabled since v1.31; a cloud-controller-manager runs it)"
	case !includesCloudLoops(c.provider):
		return "cloud-provider loop, and --cloud-provider is empty or \"external\""
	}
	return ""
}

// includesCloudLoops is KCM's rule from before v1.31: cloud loops run
// in-process only for a named, non-external provider.
func includesCloudLoops(provider string) bool {
	return provider != "" && provider != "external"
}
