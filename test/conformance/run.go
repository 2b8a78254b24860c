//go:build unix

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/ctrlhost/ctrlhost/test/cluster"
)

// preflightTimeout bounds the wait for a new namespace's default
// ServiceAccount before a side's tests run.
const preflightTimeout = 90 * time.Second

// RunOptions configures RunSide.
type RunOptions struct {
	// E2E is upstream's e2e.test (testbin.BuildCluster's).
	E2E string
	// Nodes is the cluster's number of kwok nodes.
	Nodes int
	// BinDir holds the cluster's binaries (see cluster.Options.BinDir).
	BinDir string
	// Dir receives, per side, the cluster's logs (cluster/), and each
	// e2e.test process's output (e2e-<shard>.log) and report
	// (report-<shard>.json).
	Dir string
	// Parallel is how many e2e.test processes run the tests that need not
	// run alone, at once, on the side's cluster; the [Serial] and
	// [Disruptive] tests run after them, one process alone. Default 1.
	Parallel int
	// Timeout bounds each e2e.test process (--ginkgo.timeout); it is killed
	// a minute after.
	Timeout time.Duration
	// FlakeAttempts is --ginkgo.flake-attempts (1: no retry).
	FlakeAttempts int
	// Logf receives progress lines.
	Logf func(format string, args ...any)
}

// SideRun is one controller manager's run.
type SideRun struct {
	// Results has one entry per test asked for: a test the run did not
	// reach is NotRun, with the reason.
	Results []Result
	Elapsed time.Duration
	// Dir holds the run's logs and reports.
	Dir string
}

// RunSide starts a cluster with controller manager m (its program at
// binary; "" for upstream's), checks that a new namespace gets its
// default ServiceAccount, runs the named tests against it, stops it, and
// returns the tests' results. The error reports what kept tests from
// running or from being judged (a cluster that did not start, a failed
// preflight, a suite that failed outside its tests, a run without a
// report, a component that died during the run); the results are
// complete either way.
func RunSide(ctx context.Context, o RunOptions, m cluster.Manager, binary string,
	names []string,
) (SideRun, error) {
	begin := time.Now()
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	dir := filepath.Join(o.Dir, string(m))
	run := SideRun{Dir: dir}
	notRun := func(reason string) []Result {
		out := make([]Result, len(names))
		for i, n := range names {
			out[i] = Result{Name: n, Outcome: NotRun, Reason: reason}
		}
		return out
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return run, err
	}
	c, err := cluster.Start(ctx, cluster.Options{Manager: m, ManagerBinary: binary,
		Nodes: o.Nodes, BinDir: o.BinDir, Dir: filepath.Join(dir, "cluster"), Logf: o.Logf})
	if err != nil {
		run.Results, run.Elapsed = notRun("the cluster did not start"), time.Since(begin)
		return run, fmt.Errorf("conformance: %s: %w", m, err)
	}
	var errs []error
	if err := c.ServiceAccountPreflight(ctx, preflightTimeout); err != nil {
		errs = append(errs, fmt.Errorf("conformance: %s: preflight: %w", m, err))
		run.Results = notRun("preflight: a new namespace got no default ServiceAccount " +
			"within " + preflightTimeout.String() + ", so no pod can be created in it")
	} else {
		results, err := runShards(ctx, o, c.Kubeconfig(), dir, names)
		if err != nil {
			errs = append(errs, fmt.Errorf("conformance: %s: %w", m, err))
		}
		run.Results = results
	}
	if err := c.Alive(); err != nil {
		errs = append(errs, fmt.Errorf("conformance: %s: a component died during the run: %w",
			m, err))
	}
	if err := c.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("conformance: %s: stopping the cluster: %w", m, err))
	}
	run.Elapsed = time.Since(begin)
	o.Logf("conformance: %s: %d tests in %v (logs in %s)", m, len(run.Results),
		run.Elapsed.Round(time.Second), dir)
	return run, errors.Join(errs...)
}

// runShards runs names against kubeconfig: the tests that may share the
// cluster in o.Parallel processes at once, then the serial ones in one.
// Every name gets a result; one no report mentions is NotRun.
func runShards(ctx context.Context, o RunOptions, kubeconfig, dir string, names []string) (
	[]Result, error,
) {
	parallel := max(o.Parallel, 1)
	shards := make([][]string, parallel)
	var serial []string
	i := 0
	for _, n := range names {
		if IsSerial(n) {
			serial = append(serial, n)
			continue
		}
		shards[i%parallel] = append(shards[i%parallel], n)
		i++
	}
	var (
		mu      sync.Mutex
		results []Result
		errs    []error
	)
	run := func(shard string, names []string) {
		if len(names) == 0 {
			return
		}
		rs, err := runE2E(ctx, o, kubeconfig, dir, shard, names)
		mu.Lock()
		defer mu.Unlock()
		results = append(results, rs...)
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %s: %w", shard, err))
		}
	}
	var wg sync.WaitGroup
	for i, s := range shards {
		wg.Go(func() { run(fmt.Sprint(i+1), s) })
	}
	wg.Wait()
	run("serial", serial)

	seen := map[string]bool{}
	var out []Result
	for _, r := range results {
		if !seen[r.Name] {
			seen[r.Name] = true
			out = append(out, r)
		}
	}
	for _, n := range names {
		if !seen[n] {
			out = append(out, Result{Name: n, Outcome: NotRun,
				Reason: "not reached: its e2e.test run ended before it"})
		}
	}
	return out, errors.Join(errs...)
}

// runE2E runs the named tests with e2e.test against kubeconfig and parses
// its report.
func runE2E(ctx context.Context, o RunOptions, kubeconfig, dir, shard string, names []string) (
	[]Result, error,
) {
	report := filepath.Join(dir, "report-"+shard+".json")
	_ = os.Remove(report)
	logPath := filepath.Join(dir, "e2e-"+shard+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--provider=skeleton",
		"--ginkgo.focus=" + ExactFocus(names),
		"--ginkgo.json-report=" + report,
		"--ginkgo.timeout=" + o.Timeout.String(),
		"--ginkgo.flake-attempts=" + fmt.Sprint(max(o.FlakeAttempts, 1)),
		"--ginkgo.no-color",
		"--ginkgo.v",
		"--e2e-output-dir=" + dir,
		"--disable-log-dump",
		"--allowed-not-ready-nodes=0",
		"--minStartupPods=0",
		"--node-schedulable-timeout=2m",
		"--system-pods-startup-timeout=2m",
		// There is no kubectl for this cluster (the machine's, if any, is
		// not the tested version): tests that run it fail everywhere.
		"--kubectl-path=" + filepath.Join(dir, "no-kubectl"),
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.E2E, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 30 * time.Second
	begin := time.Now()
	runErr := cmd.Run()
	o.Logf("conformance: e2e.test shard %s (%d tests) ran %v (%v)", shard, len(names),
		time.Since(begin).Round(time.Second), runErr)
	results, err := ParseReport(report)
	if err != nil {
		var suite *SuiteError
		if errors.As(err, &suite) {
			return results, err
		}
		return nil, fmt.Errorf("e2e.test (%v) wrote no report: %w; last lines of %s:\n%s",
			runErr, err, logPath, tailOf(logPath, 4<<10))
	}
	return results, nil
}

var listedTest = regexp.MustCompile(`^\s*\S+:\d+: (.+)$`)

// ListTests returns the full names of every test e2e.test holds
// (--list-tests).
func ListTests(ctx context.Context, e2e string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, e2e, "--list-tests")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("conformance: %s --list-tests: %w\n%s", e2e, err, stderr.String())
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m := listedTest.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("conformance: %s --list-tests listed no tests", e2e)
	}
	return names, sc.Err()
}

func tailOf(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}
