package docs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository's root, relative to this package.
const root = "../.."

// pages are the Markdown files the tests keep true: README.md, docs/ and
// controllers/README.md (how a built-in is made).
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md"),
		filepath.Join(root, "controllers", "README.md")}, docs...)
}

// read returns a file's text, failing t if it cannot be read.
func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rel names a path under root as the repository does.
func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

// block is a fenced code block of a Markdown page.
type block struct {
	lang   string
	line   int    // 1-based line of the opening fence
	before string // the last non-blank line before the fence
	body   string
}

// blocks returns the fenced code blocks of a Markdown text.
func blocks(text string) []block {
	var out []block
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		b := block{lang: strings.TrimPrefix(lines[i], "```"), line: i + 1}
		for j := i - 1; j >= 0; j-- {
			if strings.TrimSpace(lines[j]) != "" {
				b.before = strings.TrimSpace(lines[j])
				break
			}
		}
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			body = append(body, lines[i])
		}
		b.body = strings.Join(body, "\n")
		out = append(out, b)
	}
	return out
}

// outsideCode returns text with its fenced code blocks and inline code
// spans blanked, so that what looks like a link inside code is not one.
func outsideCode(text string) string {
	var out []string
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			out = append(out, "")
			continue
		}
		if inFence {
			out = append(out, "")
			continue
		}
		parts := strings.Split(line, "`")
		for i := 1; i < len(parts); i += 2 {
			parts[i] = ""
		}
		out = append(out, strings.Join(parts, "``"))
	}
	return strings.Join(out, "\n")
}
