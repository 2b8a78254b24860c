package sim

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// make sim-mutants reverts, one patch at a time, a fix the simulation must
// catch. A patch that no longer applies (its code moved) would leave that
// fix unguarded until someone ran the target, so every patch is checked
// against the tree here.
func TestEveryMutantStillApplies(t *testing.T) {
	patches, err := filepath.Glob("testdata/mutants/*.patch")
	if err != nil || len(patches) == 0 {
		t.Fatalf("no patches in testdata/mutants (%v)", err)
	}
	for _, p := range patches {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("git", "apply", "--check", abs)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s no longer applies to the tree (%v): %s; remake it so that it "+
				"reverts the fix again (hack/sim-mutants.sh)", filepath.Base(p), err, out)
		}
	}
}
