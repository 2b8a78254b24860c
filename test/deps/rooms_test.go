package deps

import (
	"os"
	"strings"
	"testing"
)

// TestTheArchitecturePageNamesEveryRoom keeps docs/architecture.md's room
// table equal to the packages: every top-level directory and every package
// under internal/ is named in it, and it names no internal package that
// is gone.
func TestTheArchitecturePageNamesEveryRoom(t *testing.T) {
	page, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rooms, ok := strings.Cut(string(page), "## The rooms")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## The rooms" section`)
	}
	rooms, _, _ = strings.Cut(rooms, "\n## ")
	named := func(name string) bool {
		return strings.Contains(rooms, "`"+name+"`") || strings.Contains(rooms, "`"+name+"/") ||
			strings.Contains(rooms, " `"+name+"`,") || strings.Contains(rooms, "`internal/"+name+"`")
	}
	internal := map[string]bool{}
	for pkg := range ownDeps(t) {
		top, rest, _ := strings.Cut(pkg, "/")
		switch {
		case top == "internal":
			name, _, _ := strings.Cut(rest, "/")
			internal[name] = true
			if !named(name) {
				t.Errorf("the room table of docs/architecture.md does not name internal/%s", name)
			}
		case !named(top):
			t.Errorf("the room table of docs/architecture.md does not name %s", top)
		}
	}
	// The internal row lists the packages by name; each must still exist.
	for _, line := range strings.Split(rooms, "\n") {
		if !strings.HasPrefix(line, "| `internal/…`") {
			continue
		}
		quoted := strings.Split(line, "`")
		for i := 3; i < len(quoted); i += 2 { // the quoted names after the row's own
			if f := quoted[i]; isWord(f) && !internal[f] {
				t.Errorf("docs/architecture.md names internal/%s, which is no package", f)
			}
		}
	}
}

// isWord reports whether s is a package name: lower-case letters only.
func isWord(s string) bool {
	return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz") == ""
}
