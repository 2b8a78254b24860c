package builtin_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"

	"github.com/ctrlhost/ctrlhost/controllers/builtin"
)

func TestCheckServerVersionIsKCMsSkewRule(t *testing.T) {
	for _, tc := range []struct {
		major, minor, git string
		want              string // "" passes
	}{
		{"1", "37", "v1.37.1", ""},
		{"1", "38", "v1.38.0", ""},
		{"1", "37+", "v1.37.2-gke.100", ""},
		{"1", "36", "v1.36.3", "kube-apiserver v1.36.3 is older than these controllers"},
		{"1", "34", "v1.34.4", "upgrade the API servers first"},
		{"1", "39", "v1.39.0", "more than one minor newer"},
		{"2", "0", "v2.0.0", "upgrade the controller manager"},
		{"1", "", "v1.37.1", "not a Kubernetes release number"},
	} {
		err := builtin.CheckServerVersion(&version.Info{Major: tc.major, Minor: tc.minor,
			GitVersion: tc.git})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", tc.git, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error containing %q", tc.git, err, tc.want)
		}
	}
	if builtin.CheckServerVersion(nil) == nil {
		t.Error("no version: accepted")
	}
}
