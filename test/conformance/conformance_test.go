//go:build conformance && unix

package conformance_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctrlhost/ctrlhost/test/cluster"
	"github.com/ctrlhost/ctrlhost/test/conformance"
)

var (
	setFlag = flag.String("conformance.set", "smoke",
		"the tests to run: smoke, conformance or full (see conformance.Sets)")
	sidesFlag = flag.String("conformance.sides", "upstream,native,dropin",
		"the controller managers, comma-separated, upstream (the reference) first")
	nodesFlag    = flag.Int("conformance.nodes", 3, "kwok nodes per cluster")
	parallelFlag = flag.Int("conformance.parallel", 2,
		"e2e.test processes at once per cluster, for the tests that need not run alone")
	concurrentFlag = flag.Bool("conformance.concurrent", true,
		"run the sides after upstream at the same time, each on its own cluster")
	judgeAllFlag = flag.Bool("conformance.judge-all", false,
		"run every selected test on every side, also those upstream fails")
	flakeFlag   = flag.Int("conformance.flake-attempts", 1, "--ginkgo.flake-attempts")
	timeoutFlag = flag.Duration("conformance.timeout", 4*time.Hour,
		"bound of each e2e.test process")
	dirFlag = flag.String("conformance.dir", "",
		"where the table and logs go (default: <repository>/_output/conformance/<set>)")
	binDirFlag = flag.String("conformance.bindir", "",
		"the cluster binaries and e2e.test (default: testenv's binary directory)")
	referenceFlag = flag.String("conformance.reference", "",
		"take upstream's results from this earlier run's directory instead of running it")
	nativeFlag = flag.String("conformance.native-bin", "",
		"run this program as the native side instead of building examples/kcm")
	dropinFlag = flag.String("conformance.dropin-bin", "",
		"run this program as the drop-in side instead of building it")
	focusFlag = flag.String("conformance.focus", "",
		"a regular expression over test names that replaces the set's own focus "+
			"(its skips still apply): rerun a few tests")
)

// TestConformance runs a set of upstream's e2e tests (v1.37.1) on a kwok
// cluster under upstream kube-controller-manager v1.37.1, then under
// ctrlhost's native examples/kcm and the drop-in, and prints the table. It
// fails for every test whose outcome under a ctrlhost side differs from
// upstream's, for anything that kept a side's tests from running, and,
// for the smoke set, for a test that does not pass under upstream (a smoke
// test must be one the cluster can judge).
func TestConformance(t *testing.T) {
	set, err := conformance.SetByName(*setFlag)
	if err != nil {
		t.Fatal(err)
	}
	if *focusFlag != "" {
		set.Focus = *focusFlag
	}
	var sides []cluster.Manager
	for _, s := range strings.Split(*sidesFlag, ",") {
		sides = append(sides, cluster.Manager(strings.TrimSpace(s)))
	}
	dir := *dirFlag
	if dir == "" {
		dir = filepath.Join("..", "..", "_output", "conformance", set.Name)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	binaries := map[cluster.Manager]string{}
	if *nativeFlag != "" {
		binaries[cluster.Native] = *nativeFlag
	}
	if *dropinFlag != "" {
		binaries[cluster.DropIn] = *dropinFlag
	}
	begin := time.Now()
	table, err := conformance.Run(t.Context(), conformance.Options{Binaries: binaries,
		Set: set, Sides: sides, BinDir: *binDirFlag, Dir: dir, Nodes: *nodesFlag,
		Parallel: *parallelFlag, Timeout: *timeoutFlag, FlakeAttempts: *flakeFlag,
		Concurrent: *concurrentFlag, JudgeAll: *judgeAllFlag, ReferenceDir: *referenceFlag,
		Log: &lineLogger{t: t},
	})
	if table != nil {
		t.Logf("the table (%s, in %v; logs in %s):\n\n%s", filepath.Join(dir, "table.md"),
			time.Since(begin).Round(time.Second), dir, table.Markdown())
		for _, d := range table.Defects {
			t.Errorf("%s: %s under %s, %s under %s: %s", d.Name, d.Got, d.Side, d.Want,
				sides[0], d.Reason)
		}
		if set.Name == "smoke" {
			for _, r := range table.NotApplicable {
				t.Errorf("smoke test %q fails under %s: %s", r.Name, sides[0], r.Reason)
			}
			if c := table.Count(string(sides[0])); c.Passed == 0 {
				t.Errorf("no smoke test passed under %s: %+v", sides[0], c)
			}
		}
	}
	if err != nil {
		t.Error(err)
	}
}

// lineLogger passes whole lines to t.Log.
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line) // an incomplete line waits for the rest
			return len(p), nil
		}
		l.t.Log(strings.TrimSuffix(line, "\n"))
	}
}
