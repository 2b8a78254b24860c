// Package readmecheck keeps a README's Go snippets true: each is the code
// between "// README:begin" and "// README:end" in a test file that
// compiles with its package's tests (where main is named mainProgram).
package readmecheck

import (
	"os"
	"strings"
	"testing"
)

// Check fails t unless the first Go block of readme's section (a heading
// such as "## Embedding") is, whitespace at the ends aside, the marked code
// of src with "func mainProgram() {" spelt "func main() {".
func Check(t testing.TB, readme, section, src string) {
	t.Helper()
	text, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	s := string(text)
	i := strings.Index(s, section+"\n")
	if i < 0 {
		t.Fatalf("%s has no section %q", readme, section)
	}
	s = s[i:]
	start := strings.Index(s, "```go\n")
	if start < 0 {
		t.Fatalf("%s: section %q has no Go block", readme, section)
	}
	s = s[start+len("```go\n"):]
	snippet := s[:strings.Index(s, "```")]
	c := string(code)
	b, e := strings.Index(c, "// README:begin\n"), strings.Index(c, "// README:end")
	if b < 0 || e < b {
		t.Fatalf("%s has no // README:begin … // README:end block", src)
	}
	c = strings.Replace(c[b+len("// README:begin\n"):e], "func mainProgram() {", "func main() {", 1)
	if strings.TrimSpace(c) != strings.TrimSpace(snippet) {
		t.Errorf("%s's %q snippet and %s differ:\nREADME:\n%s\ncode:\n%s", readme, section, src, snippet, c)
	}
}
