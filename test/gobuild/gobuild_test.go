package gobuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDirIsStable: a program's binary goes to the same place on every run
// (so runs do not pile up binaries), a different one per package and race
// mode, under os.TempDir()/ctrlhost-gobuild.
func TestDirIsStable(t *testing.T) {
	a1, err := New("./example").dir()
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := New("./example").dir()
	race := New("./example")
	race.race = true
	b, _ := race.dir()
	c, _ := New("./other").dir()
	if a1 != a2 {
		t.Errorf("two runs build into %s and %s", a1, a2)
	}
	if a1 == b || a1 == c {
		t.Errorf("race mode or another package shares %s", a1)
	}
	if !strings.HasPrefix(a1, filepath.Join(os.TempDir(), "ctrlhost-gobuild")+string(filepath.Separator)) {
		t.Errorf("%s is not under the temporary directory's ctrlhost-gobuild", a1)
	}
	for _, d := range []string{a1, b, c} {
		if err := os.Remove(d); err != nil {
			t.Error(err)
		}
	}
}
