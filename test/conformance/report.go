package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Outcome is what became of one test under one controller manager.
type Outcome string

const (
	Passed  Outcome = "pass"
	Failed  Outcome = "fail"
	Skipped Outcome = "skip"
	// NotRun is a test that the run did not reach or did not select.
	NotRun Outcome = "-"
)

// Result is one test's outcome in one run.
type Result struct {
	// Name is the spec's full text, as --ginkgo.focus matches it.
	Name    string
	Outcome Outcome
	// Reason is the failure's (or skip's) message, on one line.
	Reason string
	// Where is the failure's location (file:line), when it failed.
	Where   string
	Elapsed time.Duration
}

// ginkgoReport is the part of Ginkgo's JSON report (--ginkgo.json-report)
// that is read here: an array of suite reports.
type ginkgoReport []struct {
	SuiteSucceeded             bool
	SpecialSuiteFailureReasons []string
	SpecReports                []ginkgoSpec
}

type ginkgoSpec struct {
	ContainerHierarchyTexts []string
	LeafNodeType            string
	LeafNodeText            string
	State                   string
	RunTime                 time.Duration
	Failure                 *struct {
		Message        string
		ForwardedPanic string
		Location       struct {
			FileName   string
			LineNumber int
		}
		FailureNodeType string
	}
}

// SuiteError is a failure of the suite outside any test (its
// SynchronizedBeforeSuite, say): the run's results mean nothing.
type SuiteError struct{ Reasons []string }

func (e *SuiteError) Error() string {
	return "conformance: the e2e suite failed outside its tests: " + strings.Join(e.Reasons, "; ")
}

// ParseReport reads a Ginkgo JSON report and returns the results of the
// tests the run selected (a test the focus left out is in the report as
// skipped without a message, and is dropped). A suite node that failed (the
// suite's setup, its teardown) is returned as a *SuiteError alongside the
// results.
func ParseReport(path string) ([]Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	var report ginkgoReport
	if err := json.Unmarshal(data, &report); err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", path, err)
	}
	var results []Result
	var suite []string
	for _, r := range report {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != "It" {
				if s.State != "passed" && s.State != "skipped" && s.Failure != nil {
					suite = append(suite, s.LeafNodeType+": "+oneLine(s.Failure.Message, 300))
				}
				continue
			}
			res := Result{Name: specName(s), Elapsed: s.RunTime}
			switch s.State {
			case "passed":
				res.Outcome = Passed
			case "skipped":
				if s.Failure == nil {
					continue // not selected
				}
				res.Outcome = Skipped
			case "pending":
				continue
			default: // failed, panicked, timedout, interrupted, aborted
				res.Outcome = Failed
			}
			if s.Failure != nil && res.Outcome != Passed {
				msg := s.Failure.Message
				if s.Failure.ForwardedPanic != "" {
					msg = "panic: " + s.Failure.ForwardedPanic
				}
				if res.Outcome == Failed && s.State != "failed" {
					msg = s.State + ": " + msg
				}
				res.Reason = oneLine(msg, 240)
				if loc := s.Failure.Location; loc.FileName != "" {
					res.Where = fmt.Sprintf("%s:%d", shortPath(loc.FileName), loc.LineNumber)
				}
			}
			results = append(results, res)
		}
		if !r.SuiteSucceeded && len(r.SpecialSuiteFailureReasons) > 0 {
			for _, reason := range r.SpecialSuiteFailureReasons {
				// A run that reached its timeout says so here, and its
				// remaining tests count as not run, not as a suite error.
				if !strings.Contains(reason, "Interrupted") &&
					!strings.Contains(reason, "Timeout") {
					suite = append(suite, reason)
				}
			}
		}
	}
	if len(suite) > 0 {
		return results, &SuiteError{Reasons: suite}
	}
	return results, nil
}

// specName is the full text Ginkgo matches --ginkgo.focus against: the
// containers' texts and the leaf's, joined by spaces.
func specName(s ginkgoSpec) string {
	parts := make([]string, 0, len(s.ContainerHierarchyTexts)+1)
	for _, t := range s.ContainerHierarchyTexts {
		if t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(append(parts, s.LeafNodeText), " ")
}

// oneLine squeezes a message onto one line of at most n runes: the lines
// that say something, joined with " / ", without Gomega's boilerplate.
func oneLine(msg string, n int) string {
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l == "<*errors.errorString>:" || strings.HasPrefix(l, "{") ||
			strings.HasPrefix(l, "}") || strings.HasPrefix(l, "s: ") {
			continue
		}
		parts = append(parts, l)
	}
	s := strings.Join(parts, " / ")
	s = strings.ReplaceAll(s, "|", "¦") // the table's column separator
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}

// shortPath cuts a source path down to its path inside k8s.io/kubernetes
// (test/e2e/...), or its last two elements.
func shortPath(p string) string {
	if i := strings.Index(p, "/test/e2e/"); i >= 0 {
		return p[i+1:]
	}
	dir, file := filepath.Split(p)
	return filepath.Join(filepath.Base(dir), file)
}
