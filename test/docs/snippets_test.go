package docs_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// marker names the compiled code a Go block shows: the line before the
// block reads <!-- snippet: path/in/repo_test.go --> (or path#name for one
// of several regions in a file).
var marker = regexp.MustCompile(`^<!-- snippet: ([^ #]+)(?:#([a-z0-9-]+))? -->$`)

// TestGoSnippetsAreCompiled: every Go block of README.md and docs/*.md is,
// up to indentation, a region of a Go file that its module's tests compile,
// between "// snippet:begin" and "// snippet:end" (named regions:
// "// snippet:begin name"), with "func mainProgram() {" shown as
// "func main() {".
func TestGoSnippetsAreCompiled(t *testing.T) {
	checked := 0
	for _, page := range pages(t) {
		for _, b := range blocks(read(t, page)) {
			if b.lang != "go" {
				continue
			}
			where := fmt.Sprintf("%s:%d", rel(page), b.line)
			m := marker.FindStringSubmatch(b.before)
			if m == nil {
				t.Errorf("%s: a Go block without a <!-- snippet: file_test.go --> line before it "+
					"naming the compiled code it shows", where)
				continue
			}
			if !strings.HasSuffix(m[1], "_test.go") {
				t.Errorf("%s: snippet source %s is not a _test.go file", where, m[1])
				continue
			}
			code, err := region(read(t, filepath.Join(root, m[1])), m[2])
			if err != nil {
				t.Errorf("%s: %s: %v", where, m[1], err)
				continue
			}
			if code != dedent(b.body) {
				t.Errorf("%s and its source %s differ:\npage:\n%s\nsource:\n%s", where, m[1],
					dedent(b.body), code)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no Go snippet found: is root right?")
	}
	t.Logf("%d Go snippets match their compiled sources", checked)
}

// region returns the named region of a Go file (the unnamed one for ""),
// dedented, with mainProgram shown as main.
func region(src, name string) (string, error) {
	begin := "// snippet:begin"
	if name != "" {
		begin += " " + name
	}
	lines := strings.Split(src, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == begin {
			if start >= 0 {
				return "", fmt.Errorf("two %q lines", begin)
			}
			start = i + 1
		}
	}
	if start < 0 {
		return "", fmt.Errorf("no %q line", begin)
	}
	for i := start; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "// snippet:end" {
			code := dedent(strings.Join(lines[start:i], "\n"))
			return strings.Replace(code, "func mainProgram() {", "func main() {", 1), nil
		}
	}
	return "", fmt.Errorf("%q without a // snippet:end after it", begin)
}

// dedent removes the tabs every non-blank line starts with, and blank lines
// at both ends.
func dedent(s string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if common < 0 || n < common {
			common = n
		}
	}
	for i, l := range lines {
		if len(l) >= common && common > 0 {
			lines[i] = l[common:]
		} else if strings.TrimSpace(l) == "" {
			lines[i] = ""
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func TestDedent(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"\t\ta\n\t\t\tb\n\n\t\tc\n", "a\n\tb\n\nc"},
		{"a\n\tb", "a\n\tb"},
		{"\n\n\tx\n\n", "x"},
	} {
		if got := dedent(tc.in); got != tc.want {
			t.Errorf("dedent(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
