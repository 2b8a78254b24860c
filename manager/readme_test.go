package manager_test

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEEmbedding: the README's Embedding snippet is the code in
// readme_example_test.go, which compiles with the tests.
func TestREADMEEmbedding(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	i := strings.Index(section, "## Embedding")
	if i < 0 {
		t.Fatal("README has no Embedding section")
	}
	section = section[i:]
	start := strings.Index(section, "```go\n")
	if start < 0 {
		t.Fatal("README's Embedding section has no Go block")
	}
	section = section[start+len("```go\n"):]
	snippet := section[:strings.Index(section, "```")]
	code := string(src)
	code = code[strings.Index(code, "// README:begin\n")+len("// README:begin\n") : strings.Index(code, "// README:end")]
	code = strings.Replace(code, "func mainProgram() {", "func main() {", 1)
	if strings.TrimSpace(code) != strings.TrimSpace(snippet) {
		t.Errorf("README's Embedding snippet and readme_example_test.go differ:\nREADME:\n%s\ncode:\n%s", snippet, code)
	}
}
