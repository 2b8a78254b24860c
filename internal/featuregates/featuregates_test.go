package featuregates_test

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/internal/featuregates"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestClaimReleases: a claim stops conflicting once released; a Check
// agrees with a running claim of the same setting.
func TestClaimReleases(t *testing.T) {
	fg := featuregate.NewFeatureGate()
	if err := fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		"G": {Default: false, PreRelease: featuregate.Alpha}}); err != nil {
		t.Fatal(err)
	}
	on := map[string]bool{"G": true}
	if err := featuregates.Apply(fg, on); err != nil {
		t.Fatal(err)
	}
	release, err := featuregates.Claim(fg, on, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := featuregates.Check(fg, on); err != nil {
		t.Errorf("Check of the same setting: %v", err)
	}
	if err := featuregates.Check(fg, map[string]bool{"G": false}); err == nil ||
		!strings.Contains(err.Error(), `manager "a" runs with G=true`) {
		t.Errorf("Check of the other setting while a runs: %v", err)
	}
	release()
	if err := featuregates.Check(fg, map[string]bool{"G": false}); err != nil {
		t.Errorf("Check after a released its claim: %v", err)
	}
}
