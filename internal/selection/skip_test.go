package selection

import (
	"context"
	"strings"
	"testing"

	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

func TestIncludesCloudLoops(t *testing.T) {
	for provider, want := range map[string]bool{"": false, "external": false, "aws": true,
		"my-cloud": true} {
		if got := IncludesCloudLoops(provider); got != want {
			t.Errorf("IncludesCloudLoops(%q) = %v, want %v", provider, got, want)
		}
	}
}

func TestSkipSaysWhy(t *testing.T) {
	nop := func(context.Context, descriptor.Context) (descriptor.Controller, error) {
		return nil, nil
	}
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		"Off": {Default: false, PreRelease: featuregate.Alpha},
		"On":  {Default: true, PreRelease: featuregate.Beta},
	}); err != nil {
		t.Fatal(err)
	}
	running := Cloud{InProcess: true, Provider: "my-cloud"}
	for _, tc := range []struct {
		name    string
		d       descriptor.Descriptor
		cloud   Cloud
		want    string // a part of the reason; "" to run
		wantErr string
	}{
		{"plain", descriptor.New("a", nop), Cloud{}, "", ""},
		{"gate on", descriptor.New("a", nop).WithFeatureGates("On"), Cloud{}, "", ""},
		{"gate off", descriptor.New("a", nop).WithFeatureGates("On", "Off"), Cloud{},
			"feature gate Off is disabled", ""},
		{"unknown gate", descriptor.New("a", nop).WithFeatureGates("Nope"), Cloud{},
			"", `feature gate "Nope"`},
		{"cloud, none in-process", descriptor.New("a", nop).CloudProvider(),
			Cloud{Provider: "my-cloud"}, "no in-process cloud provider", ""},
		{"cloud, external", descriptor.New("a", nop).CloudProvider(),
			Cloud{InProcess: true, Provider: "external"}, "empty or \"external\"", ""},
		{"cloud, running", descriptor.New("a", nop).CloudProvider(), running, "", ""},
	} {
		got, err := Skip(tc.d, fg, tc.cloud)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: err %v, want one naming %s", tc.name, err, tc.wantErr)
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && got != "", tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: reason %q, want %q", tc.name, got, tc.want)
		}
	}
}
