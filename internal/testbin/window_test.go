package testbin_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/ctrlhost/ctrlhost/internal/testbin"
)

// The window is consecutive minors ending at the default module's, each
// with a tools module that pins its own k8s.io/kubernetes and points every
// staging module at that same release.
func TestTheWindowIsConsecutiveMinorsEachPinnedWhole(t *testing.T) {
	minors := testbin.Minors()
	if len(minors) < 4 {
		t.Errorf("the window %v: want the four newest minors at least", minors)
	}
	if last := minors[len(minors)-1]; last != testbin.DefaultModule().Minor() {
		t.Errorf("the window %v ends at %s, want the default module's %s", minors, last,
			testbin.DefaultModule().Minor())
	}
	staging := regexp.MustCompile(`(?m)^\s*(k8s\.io/[a-z0-9-]+) => (k8s\.io/[a-z0-9-]+) (v\S+)`)
	for i, minor := range minors {
		if i > 0 {
			var pmaj, pmin, maj, min int
			fmt.Sscanf(minors[i-1], "%d.%d", &pmaj, &pmin)
			fmt.Sscanf(minor, "%d.%d", &maj, &min)
			if maj != pmaj || min != pmin+1 {
				t.Errorf("the window %v skips from %s to %s", minors, minors[i-1], minor)
			}
		}
		m, err := testbin.ModuleOf(minor)
		if err != nil {
			t.Fatal(err)
		}
		v, err := m.Versions()
		if err != nil {
			t.Errorf("%s: %v", minor, err)
			continue
		}
		if !strings.HasPrefix(v.Kubernetes, "v"+minor+".") || !strings.HasPrefix(v.Etcd, "v3.") {
			t.Errorf("%s: the module pins kubernetes %s and etcd %s", minor, v.Kubernetes, v.Etcd)
		}
		want := "v0" + strings.TrimPrefix(v.Kubernetes, "v1")
		found := staging.FindAllSubmatch(m.GoMod(), -1)
		if len(found) < 20 {
			t.Errorf("%s: %d staging replaces, want every staging module of k8s.io/kubernetes",
				minor, len(found))
		}
		for _, r := range found {
			if !bytes.Equal(r[1], r[2]) || string(r[3]) != want {
				t.Errorf("%s: replace %s => %s %s, want %s", minor, r[1], r[2], r[3], want)
			}
		}
	}
}

func TestModuleOfAMinorOutsideTheWindow(t *testing.T) {
	_, err := testbin.ModuleOf("1.20")
	if err == nil || !strings.Contains(err.Error(), "not in the tested window") ||
		!strings.Contains(err.Error(), testbin.DefaultModule().Minor()) {
		t.Errorf("ModuleOf(1.20) = %v; want an error that names the window", err)
	}
	if m, err := testbin.ModuleOf(""); err != nil || m.Minor() != testbin.DefaultModule().Minor() {
		t.Errorf("ModuleOf(\"\") = %v, %v; want the default module", m.Minor(), err)
	}
}
