package contract

import (
	"fmt"
	"strings"
)

// Markdown renders the table for docs/testing.md: each row, its promise,
// and what each server does with it.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| row | what a controller may rely on | kube-apiserver | " +
		"in-memory API (`managertest.NewAPI`) |\n|---|---|---|---|\n")
	for _, r := range Rows() {
		inMemory := "holds"
		if r.NotModelled != "" {
			inMemory = fmt.Sprintf("not modelled: answered with an error (%q)", r.NotModelled)
		}
		fmt.Fprintf(&b, "| `%s` | %s | holds | %s |\n", r.Name, cell(r.Promise), inMemory)
	}
	return b.String()
}

// SimMarkdown renders the list of rows the simulation relies on, for
// docs/simulation.md.
func SimMarkdown() string {
	var b strings.Builder
	for _, r := range Rows() {
		if r.Sim {
			b.WriteString(wrap(fmt.Sprintf("- `%s`: %s", r.Name, r.Promise), "  "))
		}
	}
	return b.String()
}

// wrap breaks text into lines of at most 100 columns at spaces, the
// lines after the first indented.
func wrap(text, indent string) string {
	var b strings.Builder
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) > 100:
			b.WriteString(line + "\n")
			line = indent + word
		default:
			line += " " + word
		}
	}
	return b.String() + line + "\n"
}

// cell escapes text for a Markdown table cell.
func cell(text string) string { return strings.ReplaceAll(text, "|", `\|`) }
