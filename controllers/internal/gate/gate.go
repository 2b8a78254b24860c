// Package gate answers the built-in controllers' feature-gate questions.
//
// A built-in reads its gates through descriptor.Context.FeatureGate, which
// the host may leave nil or fill with a gate that does not know the
// built-in's features (component-base gates panic on an unknown feature).
// Enabled turns both cases into the feature's Kubernetes default, so that a
// controller behaves as KCM does unless the host registered the gate and
// --feature-gates changed it.
package gate

import "k8s.io/component-base/featuregate"

// Enabled asks fg about f when fg knows f, and answers def otherwise.
func Enabled(fg featuregate.FeatureGate, f featuregate.Feature, def bool) (on bool) {
	if fg == nil {
		return def
	}
	if known, ok := fg.(interface {
		GetAll() map[featuregate.Feature]featuregate.FeatureSpec
	}); ok {
		if _, ok := known.GetAll()[f]; !ok {
			return def
		}
	}
	defer func() {
		if recover() != nil {
			on = def
		}
	}()
	return fg.Enabled(f)
}
