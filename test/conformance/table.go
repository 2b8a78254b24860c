package conformance

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Table sets the results of one set of tests under several controller
// managers side by side. The first side is the reference (upstream KCM): a
// test that fails under it cannot be judged on this cluster (it needs real
// containers, say) and is listed apart as not applicable, counted for no
// side; every other difference from the reference is a defect.
type Table struct {
	// Set is the set of tests run, if known.
	Set   Set
	Sides []string
	// Rows are the tests the reference passed or skipped, by name.
	Rows []Row
	// NotApplicable are the tests the reference failed, by name, with its
	// reason.
	NotApplicable []Result
	// Unjudged are tests the reference did not run (its run ended early),
	// by name.
	Unjudged []string
	// Defects are the rows where a side differs from the reference.
	Defects []Defect
	// Elapsed is each side's run time (cluster start to stop).
	Elapsed map[string]time.Duration
}

// Row is one test's result under each side.
type Row struct {
	Name    string
	Results map[string]Result // by side; a missing side did not run it
}

// Defect is a test whose outcome under Side differs from the reference's.
type Defect struct {
	Name, Side string
	Want, Got  Outcome
	Reason     string
}

// Count is one side's tally over the judged rows.
type Count struct {
	// Ran counts tests that ran (passed or failed); Skipped those the
	// suite skipped itself; NotRun those the side did not reach.
	Ran, Passed, Failed, Skipped, NotRun int
}

// NewTable builds the table from each side's results; sides[0] is the
// reference.
func NewTable(sides []string, results map[string][]Result) *Table {
	t := &Table{Sides: slices.Clone(sides), Elapsed: map[string]time.Duration{}}
	bySide := map[string]map[string]Result{}
	names := map[string]bool{}
	for side, rs := range results {
		bySide[side] = map[string]Result{}
		for _, r := range rs {
			bySide[side][r.Name] = r
			names[r.Name] = true
		}
	}
	ref := sides[0]
	sorted := slices.Collect(maps.Keys(names))
	SortConformanceFirst(sorted)
	for _, name := range sorted {
		want, ok := bySide[ref][name]
		switch {
		case !ok:
			t.Unjudged = append(t.Unjudged, name)
			continue
		case want.Outcome == Failed:
			t.NotApplicable = append(t.NotApplicable, want)
			continue
		}
		row := Row{Name: name, Results: map[string]Result{}}
		for _, side := range sides {
			got, ok := bySide[side][name]
			if !ok {
				continue
			}
			row.Results[side] = got
			if side != ref && got.Outcome != want.Outcome {
				t.Defects = append(t.Defects, Defect{Name: name, Side: side, Want: want.Outcome,
					Got: got.Outcome, Reason: reasonOf(got)})
			}
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func reasonOf(r Result) string {
	if r.Where != "" {
		return r.Reason + " (" + r.Where + ")"
	}
	return r.Reason
}

// Count tallies side over the judged rows.
func (t *Table) Count(side string) Count {
	var c Count
	for _, row := range t.Rows {
		r, ok := row.Results[side]
		switch {
		case !ok || r.Outcome == NotRun:
			c.NotRun++
		case r.Outcome == Passed:
			c.Ran++
			c.Passed++
		case r.Outcome == Failed:
			c.Ran++
			c.Failed++
		case r.Outcome == Skipped:
			c.Skipped++
		}
	}
	return c
}

// Markdown renders the table: a summary per side, the judged tests with
// each side's outcome and the reason of any failure or skip, the defects,
// and the tests that are not applicable on this cluster.
func (t *Table) Markdown() string {
	var b strings.Builder
	if t.Set.Name != "" {
		fmt.Fprintf(&b, "Set %s: %s.\n\n", t.Set.Name, t.Set.Description)
	}
	fmt.Fprintf(&b, "| side | ran | passed | failed | skipped | not run | run time |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|\n")
	for _, side := range t.Sides {
		c := t.Count(side)
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %v |\n", side, c.Ran, c.Passed, c.Failed,
			c.Skipped, c.NotRun, t.Elapsed[side].Round(time.Second))
	}
	fmt.Fprintf(&b, "\n%d tests judged; %d not applicable under kwok (failed under %s); "+
		"%d differences from %s.\n", len(t.Rows), len(t.NotApplicable), t.Sides[0],
		len(t.Defects), t.Sides[0])
	if len(t.Unjudged) > 0 {
		fmt.Fprintf(&b, "%d tests not run under %s (its run ended early).\n", len(t.Unjudged),
			t.Sides[0])
	}

	fmt.Fprintf(&b, "\n| test | %s | reason |\n", strings.Join(t.Sides, " | "))
	fmt.Fprintf(&b, "|---|%s---|\n", strings.Repeat(":---:|", len(t.Sides)))
	for _, row := range t.Rows {
		var cells, reasons []string
		for _, side := range t.Sides {
			r, ok := row.Results[side]
			if !ok {
				cells = append(cells, string(NotRun))
				continue
			}
			cells = append(cells, string(r.Outcome))
			if r.Outcome != Passed && r.Reason != "" {
				reasons = append(reasons, side+": "+reasonOf(r))
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(row.Name), strings.Join(cells, " | "),
			cell(strings.Join(dedupe(reasons), "; ")))
	}

	if len(t.Defects) > 0 {
		fmt.Fprintf(&b, "\n### Differences from %s\n\n| test | side | %s | side's | reason |\n"+
			"|---|---|:---:|:---:|---|\n", t.Sides[0], t.Sides[0])
		for _, d := range t.Defects {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(d.Name), d.Side, d.Want, d.Got,
				cell(d.Reason))
		}
	}
	if len(t.NotApplicable) > 0 {
		fmt.Fprintf(&b, "\n### Not applicable under kwok (failed under %s)\n\n"+
			"| test | reason under %s |\n|---|---|\n", t.Sides[0], t.Sides[0])
		for _, r := range t.NotApplicable {
			fmt.Fprintf(&b, "| %s | %s |\n", cell(r.Name), cell(reasonOf(r)))
		}
	}
	if len(t.Unjudged) > 0 {
		fmt.Fprintf(&b, "\n### Not run under %s\n\n", t.Sides[0])
		for _, n := range t.Unjudged {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

// dedupe drops reasons that repeat an earlier side's word for word, naming
// every side that gave it.
func dedupe(reasons []string) []string {
	var out []string
	seen := map[string]int{}
	for _, r := range reasons {
		side, text, _ := strings.Cut(r, ": ")
		if i, ok := seen[text]; ok {
			head, rest, _ := strings.Cut(out[i], ": ")
			out[i] = head + ", " + side + ": " + rest
			continue
		}
		seen[text] = len(out)
		out = append(out, r)
	}
	return out
}

// cell makes s safe inside a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", "¦", "\n", " ").Replace(s)
}
