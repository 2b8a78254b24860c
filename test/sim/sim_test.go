package sim

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

var (
	flagSeeds  = flag.Int("sim.seeds", 0, "how many seeds TestSimulation runs (default 300, 30 under -race)")
	flagFirst  = flag.Uint64("sim.first", 1, "the first seed TestSimulation runs")
	flagSeed   = flag.Uint64("sim.seed", 0, "run only this seed (a failing seed's replay), with its whole trace")
	flagRepeat = flag.Int("sim.repeat", 1, "run each seed this many times")
	flagStacks = flag.String("sim.stacks", "", "write every goroutine's stack to this file "+
		"at each violation (replay one seed with -test.parallel=1)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	StacksFile = *flagStacks
	// client-go logs through klog, process-wide: the simulated replicas'
	// client-go lines are not wanted among the test's output.
	klog.SetLogger(logr.Discard())
	// apimachinery rate-limits HandleError with a process-wide timestamp of
	// the last error; each bubble's fake clock starts in the year 2000, so
	// a timestamp from the real clock (or a later bubble instant) made the
	// next error's handler sleep for the difference, decades, and wedged a
	// reflector. The simulation runs without that back-off.
	utilruntime.ErrorHandlers = nil
	goleak.VerifyTestMain(m)
}

// bubbleStacks returns the stacks of goroutines left in synctest bubbles,
// their own frames only (the ctrlhost ones and the first of each).
func bubbleStacks() string {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "synctest bubble") {
			continue
		}
		lines := strings.Split(g, "\n")
		keep := []string{lines[0]}
		for i := 1; i+1 < len(lines); i += 2 {
			if i == 1 || strings.Contains(lines[i], "ctrlhost") {
				keep = append(keep, "  "+lines[i]+" "+strings.TrimSpace(lines[i+1]))
			}
		}
		out = append(out, strings.Join(keep, "\n"))
	}
	return strings.Join(out, "\n")
}

// TestSimulation runs -sim.seeds seeds (300 by default, about half a
// minute on two cores: seeds run in parallel;
// make sim runs 10,000) and fails with the seed, its configuration, what broke,
// the end of its trace and the command that replays it.
func TestSimulation(t *testing.T) {
	first, n := *flagFirst, uint64(*flagSeeds)
	if n == 0 {
		// A seed takes about 0.15 s, seven times that under -race: make
		// unit runs 30 seeds with the race detector, and make test 300
		// without it.
		n = 300
		if raceEnabled {
			n = 30
		}
	}
	if *flagSeed != 0 {
		first, n = *flagSeed, 1
	}
	started := time.Now()
	var rejected, failed atomic.Int64
	t.Cleanup(func() { // after the parallel subtests
		fmt.Fprintf(os.Stderr,
			"sim: %d seeds from %d in %v: %d failed, %d with lease settings Build rejected\n",
			n, first, time.Since(started).Round(time.Millisecond), failed.Load(), rejected.Load())
	})
	for seed := first; seed < first+n; seed++ {
		for rep := range *flagRepeat {
			name := fmt.Sprint(seed)
			if *flagRepeat > 1 {
				name += fmt.Sprintf("#%d", rep)
			}
			t.Run(name, func(t *testing.T) {
				// Seeds share nothing but the process: each runs in its
				// own bubble, on its own fake clock, so they run side by
				// side on every core, and a seed's trace is the same.
				t.Parallel()
				cfg := NewConfig(seed)
				dir := t.TempDir()
				var res Result
				func() {
					defer func() {
						// synctest panics when the run ends with goroutines
						// blocked for good: a leak, reported with the seed.
						if v := recover(); v != nil {
							msg := fmt.Sprintf("the run ended with goroutines blocked for good: "+
								"%v\n(the stacks of every seed's bubble running then; "+
								"replay the seed alone for its own)\n%s", v, bubbleStacks())
							res.Violations = append(res.Violations, msg)
						}
					}()
					synctest.Test(t, func(*testing.T) { res = Run(cfg, dir) })
				}()
				if res.Rejected != nil {
					rejected.Add(1)
				}
				if len(res.Violations) == 0 && *flagSeed == 0 {
					return
				}
				if len(res.Violations) > 0 {
					failed.Add(1)
				}
				trace := res.Trace
				if *flagSeed == 0 && len(trace) > 60 {
					trace = append([]string{"…"}, trace[len(trace)-60:]...)
				}
				report := fmt.Sprintf("%s\n\nviolations:\n  %s\n\ntrace:\n  %s\n\nreplay: go test ./test/sim -run 'TestSimulation' -sim.seed=%d -v",
					cfg, strings.Join(res.Violations, "\n  "), strings.Join(trace, "\n  "), seed)
				if len(res.Violations) > 0 {
					t.Error(report)
				} else {
					t.Log(report)
				}
			})
		}
	}
}
