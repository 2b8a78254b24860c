package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestRelativeLinksResolve: every relative link of README.md and docs/*.md
// names a file or directory of the repository, and an anchor names a
// heading of its page (as GitHub makes anchors of headings).
func TestRelativeLinksResolve(t *testing.T) {
	for _, page := range pages(t) {
		text := outsideCode(read(t, page))
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if err := resolve(t, page, target); err != nil {
				t.Errorf("%s: link %q: %v", rel(page), target, err)
			}
		}
	}
}

func resolve(t *testing.T, page, target string) error {
	path, anchor, _ := strings.Cut(target, "#")
	file := page
	if path != "" {
		file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("no such file or directory")
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(file, ".md") {
		return fmt.Errorf("an anchor into a file that is not Markdown")
	}
	for _, a := range anchors(read(t, file)) {
		if a == anchor {
			return nil
		}
	}
	return fmt.Errorf("%s has no heading with anchor #%s", rel(file), anchor)
}

// anchors returns the anchors GitHub gives a page's headings.
func anchors(text string) []string {
	var out []string
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		a := slug(strings.TrimSpace(strings.TrimLeft(line, "#")))
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}

// slug is GitHub's anchor for a heading: lower case, letters, digits,
// hyphens and underscores kept, spaces made hyphens, the rest dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Sharding: every replica works":                "sharding-every-replica-works",
		"Moving the cloud controllers from KCM to CCM": "moving-the-cloud-controllers-from-kcm-to-ccm",
		"KCM → CCM":                   "kcm--ccm",
		"`--controllers` and aliases": "--controllers-and-aliases",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
