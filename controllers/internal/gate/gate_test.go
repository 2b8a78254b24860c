package gate

import (
	"testing"

	"k8s.io/component-base/featuregate"
)

func TestEnabled(t *testing.T) {
	const known, unknown featuregate.Feature = "Known", "Unknown"
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{known: {Default: false, PreRelease: featuregate.Beta}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		fg   featuregate.FeatureGate
		f    featuregate.Feature
		def  bool
		want bool
	}{
		{"nil gate answers the default", nil, known, true, true},
		{"a known feature answers the gate", fg, known, true, false},
		{"an unknown feature answers the default", fg, unknown, true, true},
		{"an unknown feature answers a false default", fg, unknown, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Enabled(tc.fg, tc.f, tc.def); got != tc.want {
				t.Errorf("Enabled(%q, default %v) = %v, want %v", tc.f, tc.def, got, tc.want)
			}
		})
	}
}
