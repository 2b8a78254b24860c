package contract_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctrlhost/ctrlhost/test/integration/contract"
)

var update = flag.Bool("update", false, "rewrite the contract regions of docs/testing.md "+
	"and docs/simulation.md")

// TestDocsTable: docs/testing.md shows the contract table, and
// docs/simulation.md the rows the simulation relies on, as the code
// states them. Run with -update to rewrite them.
func TestDocsTable(t *testing.T) {
	docs := filepath.Join("..", "..", "..", "docs")
	for file, region := range map[string]string{
		"testing.md":    contract.Markdown(),
		"simulation.md": contract.SimMarkdown(),
	} {
		path := filepath.Join(docs, file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := replaceRegion(string(data), region)
		if err != nil {
			t.Fatalf("docs/%s: %v", file, err)
		}
		if want == string(data) {
			continue
		}
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("docs/%s's contract region is not what the table says; run\n"+
			"\tgo test ./test/integration/contract -run TestDocsTable -update", file)
	}
}

// replaceRegion puts region between the "<!-- contract:begin -->" line
// and the "<!-- contract:end -->" line of text.
func replaceRegion(text, region string) (string, error) {
	const begin, end = "<!-- contract:begin -->\n", "<!-- contract:end -->"
	i := strings.Index(text, begin)
	if i < 0 {
		return "", fmt.Errorf("no %q line", strings.TrimSpace(begin))
	}
	i += len(begin)
	j := strings.Index(text[i:], end)
	if j < 0 {
		return "", fmt.Errorf("no %q line after the begin line", end)
	}
	return text[:i] + region + text[i+j:], nil
}
