//go:build unix

package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/ctrlhost/ctrlhost/internal/testbin"
	"github.com/ctrlhost/ctrlhost/test/cluster"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// Options configures Run.
type Options struct {
	// Set selects the tests.
	Set Set
	// Sides are the controller managers to run, the reference
	// (cluster.Upstream) first. Default: cluster.Managers.
	Sides []cluster.Manager
	// BinDir holds the cluster binaries and e2e.test (make clusterbin).
	// Default: testenv's binary directory.
	BinDir string
	// Dir receives the table (table.md) and every side's logs.
	Dir string
	// Nodes per cluster. Default 3.
	Nodes int
	// Parallel is RunOptions.Parallel for every side. Default 1.
	Parallel int
	// Timeout bounds each e2e.test process. Default 4h.
	Timeout time.Duration
	// FlakeAttempts is --ginkgo.flake-attempts for every side. Default 1.
	FlakeAttempts int
	// Concurrent runs the sides after the reference at the same time, each
	// on a cluster of its own; the reference always runs first.
	Concurrent bool
	// JudgeAll runs every selected test under every side; by default the
	// other sides run only the tests the reference did not fail (the rest
	// are not applicable whatever they do).
	JudgeAll bool
	// ReferenceDir, when set, is the Dir of an earlier run whose reference
	// results (its upstream/report-*.json) are used instead of running the
	// reference again.
	ReferenceDir string
	// Binaries are programs to run instead of building a side's controller
	// manager from this repository (a patched or installed build).
	Binaries map[cluster.Manager]string
	// Log receives progress lines and the builds' output. Default: discard.
	Log io.Writer
}

// Run runs the set under each side and returns the table; it writes the
// table to Dir/table.md too. The error lists what kept tests from running
// (see RunSide) on any side; the table is returned whenever the reference
// ran.
func Run(ctx context.Context, o Options) (*Table, error) {
	if len(o.Sides) == 0 {
		o.Sides = cluster.Managers
	}
	if o.Sides[0] != cluster.Upstream {
		return nil, fmt.Errorf("conformance: the first side must be %s, the reference",
			cluster.Upstream)
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Timeout == 0 {
		o.Timeout = 4 * time.Hour
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.BinDir == "" {
		apiserver, _, err := testenv.BinaryPaths(testenv.Options{})
		if err != nil {
			return nil, err
		}
		o.BinDir = filepath.Dir(apiserver)
	}
	var logMu sync.Mutex
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		now := time.Now().Format("15:04:05")
		fmt.Fprintf(o.Log, "%s "+format+"\n", append([]any{now}, args...)...)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	e2e := filepath.Join(o.BinDir, testbin.E2EBinary)
	all, err := ListTests(ctx, e2e)
	if err != nil {
		return nil, err
	}
	names, err := o.Set.Select(all)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("conformance: set %s selects none of e2e.test's %d tests",
			o.Set.Name, len(all))
	}
	logf("conformance: set %s: %d of e2e.test's %d tests, %d serial; sides %v", o.Set.Name,
		len(names), len(all), countSerial(names), o.Sides)
	var build []cluster.Manager
	for _, m := range o.Sides {
		if o.Binaries[m] == "" {
			build = append(build, m)
		}
	}
	binaries, err := cluster.BuildManagers(ctx, filepath.Join(o.Dir, "bin"), o.Log, build...)
	if err != nil {
		return nil, err
	}
	for m, path := range o.Binaries {
		binaries[m] = path
		logf("conformance: %s runs %s", m, path)
	}
	ro := RunOptions{E2E: e2e, Nodes: o.Nodes, BinDir: o.BinDir, Dir: o.Dir,
		Parallel: o.Parallel, Timeout: o.Timeout, FlakeAttempts: o.FlakeAttempts, Logf: logf}

	results := map[string][]Result{}
	elapsed := map[string]time.Duration{}
	var errs []error
	var ref SideRun
	if o.ReferenceDir != "" {
		ref.Results, err = readSide(filepath.Join(o.ReferenceDir, string(cluster.Upstream)), names)
		logf("conformance: %s: %d results from %s", cluster.Upstream, len(ref.Results),
			o.ReferenceDir)
	} else {
		ref, err = RunSide(ctx, ro, cluster.Upstream, "", names)
	}
	results[string(cluster.Upstream)], elapsed[string(cluster.Upstream)] = ref.Results, ref.Elapsed
	if err != nil {
		errs = append(errs, err)
	}
	judged := names
	if !o.JudgeAll {
		judged = nil
		for _, r := range ref.Results {
			if r.Outcome != Failed {
				judged = append(judged, r.Name)
			}
		}
		SortConformanceFirst(judged)
		logf("conformance: %d of %d tests did not fail under %s; the other sides run those",
			len(judged), len(names), cluster.Upstream)
	}
	var mu sync.Mutex
	side := func(m cluster.Manager) {
		run, err := RunSide(ctx, ro, m, binaries[m], judged)
		mu.Lock()
		defer mu.Unlock()
		results[string(m)], elapsed[string(m)] = run.Results, run.Elapsed
		if err != nil {
			errs = append(errs, err)
		}
	}
	var wg sync.WaitGroup
	for _, m := range o.Sides[1:] {
		if o.Concurrent {
			wg.Go(func() { side(m) })
		} else {
			side(m)
		}
	}
	wg.Wait()

	sides := make([]string, len(o.Sides))
	for i, m := range o.Sides {
		sides[i] = string(m)
	}
	t := NewTable(sides, results)
	t.Elapsed = elapsed
	t.Set = o.Set
	table := filepath.Join(o.Dir, "table.md")
	if err := os.WriteFile(table, []byte(t.Markdown()), 0o644); err != nil {
		errs = append(errs, err)
	}
	return t, errors.Join(errs...)
}

func countSerial(names []string) int {
	return len(slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !IsSerial(n) }))
}

// readSide reads the results of names from a side's reports in dir (an
// earlier run's); a name no report mentions is NotRun.
func readSide(dir string, names []string) ([]Result, error) {
	reports, err := filepath.Glob(filepath.Join(dir, "report-*.json"))
	if err != nil || len(reports) == 0 {
		return nil, fmt.Errorf("conformance: no reports in %s (%v)", dir, err)
	}
	byName := map[string]Result{}
	for _, r := range reports {
		rs, err := ParseReport(r)
		if err != nil {
			return nil, err
		}
		for _, res := range rs {
			byName[res.Name] = res
		}
	}
	out := make([]Result, 0, len(names))
	for _, n := range names {
		r, ok := byName[n]
		if !ok {
			r = Result{Name: n, Outcome: NotRun, Reason: "not in the reference's reports"}
		}
		out = append(out, r)
	}
	return out, nil
}
