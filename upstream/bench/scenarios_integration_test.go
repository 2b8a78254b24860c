//go:build integration

package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/controllers/builtin"
	"github.com/ctrlhost/ctrlhost/test/procs"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// settings are the bench's sizes, from the environment (the defaults are
// the issue's; docs/benchmarks.md says how long they take).
type settings struct {
	rounds       int      // BENCH_ROUNDS: A B rounds per scenario
	budgets      [][2]int // BENCH_QPS: "qps/burst,…" for convergence
	replicaSets  int      // BENCH_RS
	replicas     int      // BENCH_REPLICAS
	storedCounts []int    // BENCH_PODS: pods stored for startup and failover
	kill         bool     // BENCH_KILL: also SIGKILL failovers (each waits out a lease)
	scenarios    []string // BENCH_SCENARIOS: which of convergence, startup, failover run
}

var allScenarios = []string{"convergence", "startup", "startup-native", "failover"}

func (s settings) runs(scenario string) bool { return slices.Contains(s.scenarios, scenario) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func loadSettings(tb testing.TB) settings {
	s := settings{
		rounds:      envInt("BENCH_ROUNDS", 2),
		replicaSets: envInt("BENCH_RS", 100),
		replicas:    envInt("BENCH_REPLICAS", 50),
		kill:        os.Getenv("BENCH_KILL") != "0",
	}
	qps := os.Getenv("BENCH_QPS")
	if qps == "" {
		qps = "20/30,2000/4000"
	}
	for _, b := range strings.Split(qps, ",") {
		q, burst, ok := strings.Cut(b, "/")
		qi, err1 := strconv.Atoi(q)
		bi, err2 := strconv.Atoi(burst)
		if !ok || err1 != nil || err2 != nil {
			tb.Fatalf("BENCH_QPS %q: want qps/burst pairs such as 20/30,2000/4000", qps)
		}
		s.budgets = append(s.budgets, [2]int{qi, bi})
	}
	pods := os.Getenv("BENCH_PODS")
	if pods == "" {
		pods = "5000,50000"
	}
	for _, p := range strings.Split(pods, ",") {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			tb.Fatalf("BENCH_PODS %q: want increasing pod counts such as 5000,50000", pods)
		}
		s.storedCounts = append(s.storedCounts, n)
	}
	s.scenarios = allScenarios
	if v := os.Getenv("BENCH_SCENARIOS"); v != "" {
		s.scenarios = strings.Split(v, ",")
		for _, sc := range s.scenarios {
			if !slices.Contains(allScenarios, sc) {
				tb.Fatalf("BENCH_SCENARIOS %q: %q is not one of %s", v, sc, strings.Join(allScenarios, ","))
			}
		}
	}
	return s
}

// BenchmarkVersusUpstream runs every scenario for ctrlhost and upstream
// kube-controller-manager, alternating, and prints the table. Run it with
// -benchtime 1x (make bench does).
func BenchmarkVersusUpstream(b *testing.B) {
	s := loadSettings(b)
	for range b.N {
		versusUpstream(b, s)
	}
}

// TestVersusUpstreamSmoke runs every scenario once at toy sizes, so that
// `make test` keeps the bench working (the numbers mean nothing here).
func TestVersusUpstreamSmoke(t *testing.T) {
	versusUpstream(t, settings{
		rounds: 1, budgets: [][2]int{{2000, 4000}}, replicaSets: 2, replicas: 2,
		storedCounts: []int{20, 40}, scenarios: allScenarios,
	})
}

func versusUpstream(tb testing.TB, s settings) {
	env, err := testenv.Start(context.Background(), testenv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			tb.Error(err)
		}
	}()
	h := newHarness(tb, env)
	res := newSamples()
	for _, budget := range s.budgets {
		if s.runs("convergence") {
			h.convergence(s, budget, res)
		}
	}
	if s.runs("startup") || s.runs("startup-native") || s.runs("failover") {
		stored := h.namespace("bench-stored")
		have := 0
		for _, n := range s.storedCounts {
			h.createPods(stored, have, n)
			have = n
			if s.runs("startup") {
				h.startup(s, n, "", res)
				h.floorSync(n, res)
			}
			if s.runs("startup-native") {
				h.startup(s, n, nativeSet(), res)
			}
			if s.runs("failover") {
				h.failover(s, n, syscall.SIGTERM, res)
				if s.kill {
					h.failover(s, n, syscall.SIGKILL, res)
				}
			}
		}
	}
	if n := len(s.storedCounts); n >= 2 {
		first, last := s.storedCounts[0], s.storedCounts[n-1]
		for _, set := range []string{"", ", full native set"} {
			for _, p := range []program{ctrlhost, upstream} {
				for _, row := range []string{"Go heap settled after startup",
					"Go heap at startup's last GC"} {
					los := res.get(fmt.Sprintf("%s, %d pods%s", row, first, set), p.name)
					his := res.get(fmt.Sprintf("%s, %d pods%s", row, last, set), p.name)
					if len(los) == 0 || len(his) == 0 {
						continue
					}
					res.add(fmt.Sprintf("%s: per cached pod%s", row, set), "KiB", p.name,
						(median(his)-median(los))*1024/float64(last-first))
				}
			}
		}
	}
	fmt.Printf("\n%d round(s) on %d CPUs, %s; medians of the rounds, worst in parentheses.\n\n%s\n",
		s.rounds, runtime.NumCPU(), runtime.Version(), res.table())
	if out := os.Getenv("BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(res.table()), 0o644); err != nil {
			tb.Error(err)
		}
	}
}

// alternate runs f for ctrlhost and upstream, A B A B.
func alternate(rounds int, progs []program, f func(p program)) {
	for range rounds {
		for _, p := range progs {
			f(p)
		}
	}
}

// convergence: one replica, then ReplicaSets × replicas created at once;
// the time until every ReplicaSet's status counts all its pods. The floor
// is a bare client creating as many pods on the same budget.
func (h *harness) convergence(s settings, budget [2]int, res *samples) {
	tb := h.tb
	row := fmt.Sprintf("convergence %d×%d at %d/%d QPS", s.replicaSets, s.replicas, budget[0], budget[1])
	alternate(s.rounds, []program{ctrlhost, upstream}, func(p program) {
		ns := h.namespace("bench-conv")
		pr, create := h.newProbe(ns)
		proc := h.start(p, p.name, unique("bench-conv"), budget[0], budget[1])
		create()
		pr.wait(tb, 3*time.Minute, proc)
		start := time.Now()
		var wg sync.WaitGroup
		for i := range s.replicaSets {
			wg.Go(func() {
				if _, err := h.cs.AppsV1().ReplicaSets(ns).Create(context.Background(), replicaSet(fmt.Sprintf("rs-%d", i), int32(s.replicas)), metav1.CreateOptions{}); err != nil {
					tb.Error(err)
				}
			})
		}
		wg.Wait()
		h.poll("convergence", 30*time.Minute, func() bool {
			list, err := h.cs.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return false
			}
			done := 0
			for _, rs := range list.Items {
				if rs.Status.Replicas == int32(s.replicas) && rs.Status.ObservedGeneration == rs.Generation {
					done++
				}
			}
			return done == s.replicaSets
		})
		res.add(row, "s", p.name, time.Since(start).Seconds())
		mem := measureMemory(tb, proc)
		res.add(fmt.Sprintf("RSS after convergence at %d/%d QPS", budget[0], budget[1]), "MiB", p.name, mem.rssMiB)
		res.add(fmt.Sprintf("Go heap after convergence at %d/%d QPS", budget[0], budget[1]), "MiB", p.name, mem.heapMiB)
		proc.Signal(syscall.SIGTERM, time.Minute)
		h.clean(ns)
	})
	ns := h.namespace("bench-floor")
	cfg := rest.CopyConfig(h.env.Config())
	cfg.QPS, cfg.Burst = float32(budget[0]), budget[1]
	floor := kubernetes.NewForConfigOrDie(cfg)
	start := time.Now()
	total := s.replicaSets * s.replicas
	var wg sync.WaitGroup
	next := make(chan int)
	for range 100 {
		wg.Go(func() {
			for i := range next {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("floor-%d", i)}, Spec: *podTemplate.Spec.DeepCopy()}
				if _, err := floor.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
					tb.Error(err)
				}
			}
		})
	}
	for i := range total {
		next <- i
	}
	close(next)
	wg.Wait()
	res.add(row, "s", "floor", time.Since(start).Seconds())
	h.clean(ns)
}

// startup: n pods stored; process start → first action on a probe (every
// controller running on synced caches, as the probe's controller waits for
// its caches before it acts). Both programs run the bench's controllers,
// or ctrls (every native built-in: nativeSet), whose rows say so.
func (h *harness) startup(s settings, n int, ctrls string, res *samples) {
	set := ""
	if ctrls != "" {
		set = ", full native set"
	}
	row := fmt.Sprintf("startup → first action, %d pods%s", n, set)
	programs := []program{ctrlhost, upstream}
	for i := range programs {
		programs[i].controllers = ctrls
	}
	alternate(s.rounds, programs, func(p program) {
		ns := h.namespace("bench-start")
		pr, create := h.newProbe(ns)
		create()
		start := time.Now()
		// Both serve /debug/pprof, so that the settled heap can be read.
		proc, port := h.startProfiled(p, p.name, unique("bench-start"), 2000, 4000)
		var cpu sync.WaitGroup
		if h.profileDir != "" && os.Getenv("BENCH_CPU_PROFILE") != "" {
			// The first seconds of the program, from as soon as it serves.
			cpu.Go(func() {
				h.cpuProfile(port, fmt.Sprintf("%s-%d-pods.cpu.pb.gz", strings.ReplaceAll(p.name, " ", "-"), n))
			})
		}
		at := pr.wait(h.tb, 5*time.Minute, proc)
		cpu.Wait()
		if os.Getenv("BENCH_TRACE") != "" {
			h.tb.Logf("%s: its log from its start to the probe's pod at +%.1fms:\n%s",
				p.name, ms(at.Sub(start)), trace(proc, start, start, at))
		}
		res.add(row, "s", p.name, at.Sub(start).Seconds())
		mem := measureMemory(h.tb, proc)
		res.add(fmt.Sprintf("RSS after startup, %d pods%s", n, set), "MiB", p.name, mem.rssMiB)
		res.add(fmt.Sprintf("peak RSS during startup, %d pods%s", n, set), "MiB", p.name,
			mem.peakRSSMiB)
		res.add(fmt.Sprintf("Go heap at startup's last GC, %d pods%s", n, set), "MiB", p.name,
			mem.heapMiB)
		res.add(fmt.Sprintf("Go heap settled after startup, %d pods%s", n, set), "MiB", p.name,
			h.settledHeapMiB(port))
		if h.profileDir != "" {
			h.heapProfile(port, fmt.Sprintf("%s-%d-pods%s.pb.gz",
				strings.ReplaceAll(p.name, " ", "-"), n, strings.ReplaceAll(set, " ", "-")))
		}
		proc.Signal(syscall.SIGTERM, time.Minute)
	})
}

// nativeSet is --controllers with every native built-in of ctrlhost, by
// KCM's names, which upstream knows too.
func nativeSet() string {
	var names []string
	for _, d := range builtin.NewOptions().Descriptors() {
		names = append(names, d.Name())
	}
	return strings.Join(names, ",")
}

// failover: two replicas; sig to the leader, and at once a probe → the
// other acts on the probe. A round in which the old leader still acted on
// it (its pod appeared before the new leader held the lease) is run again.
func (h *harness) failover(s settings, n int, sig syscall.Signal, res *samples) {
	row := fmt.Sprintf("failover (%s) → action, %d pods", sigName(sig), n)
	alternate(s.rounds, []program{ctrlhost, ctrlhostWarm, upstream}, func(p program) {
		for attempt := 1; ; attempt++ {
			if h.failoverOnce(p, row, sig, res) {
				return
			}
			if attempt == 3 {
				h.tb.Fatalf("%s: the old leader acted on the probe in %d rounds out of %d", p.name, attempt, attempt)
			}
			h.tb.Logf("%s: the old leader acted on the probe before it stopped; this round again", p.name)
		}
	})
}

// failoverOnce runs one failover round of p and records it, or reports
// false when the old leader, not the new one, acted on the probe.
func (h *harness) failoverOnce(p program, row string, sig syscall.Signal, res *samples) bool {
	ns := h.namespace("bench-fail")
	lease := unique("bench-fail")
	first, create := h.newProbe(ns)
	leaderProc := h.start(p, p.name+" a", lease, 2000, 4000)
	create()
	first.wait(h.tb, 5*time.Minute, leaderProc)
	follower := h.start(p, p.name+" b", lease, 2000, 4000)
	follower.WaitLine(p.follower, time.Time{}, 5*time.Minute)
	second, create2 := h.newProbe(ns)
	sent := leaderProc.Send(sig)
	create2()
	at := second.wait(h.tb, 2*time.Minute, follower)
	exited := leaderProc.WaitExit(time.Minute)
	defer follower.Signal(syscall.SIGTERM, time.Minute)
	// Waited for, not looked up: the pod may appear before the follower's
	// line is read from its pipe, or the old leader may have made it, and
	// the follower leads only once that one is gone.
	l := follower.WaitLine(p.leads, sent, 2*time.Minute)
	if at.Before(l.At) {
		return false
	}
	if os.Getenv("BENCH_TRACE") != "" {
		h.tb.Logf("%s: the old leader's log from the signal to its exit, then the new leader's to the probe's pod at +%.1fms:\n%s%s",
			p.name, ms(at.Sub(sent)), trace(leaderProc, sent, sent, exited), trace(follower, sent, l.At, at))
	}
	res.add(row, "s", p.name, at.Sub(sent).Seconds())
	// Where the time went: the new leader's lease, its first action after
	// it, and (not on the path) the old leader's exit.
	res.add(row+": new leader holds the lease", "s", p.name, l.At.Sub(sent).Seconds())
	res.add(row+": lease → action", "s", p.name, at.Sub(l.At).Seconds())
	res.add(row+": old leader exited", "s", p.name, exited.Sub(sent).Seconds())
	return true
}

// trace returns p's lines read between from and to, each stamped with its
// time since zero.
func trace(p *procs.Process, zero, from, to time.Time) string {
	var b strings.Builder
	for _, line := range p.Lines() {
		if !line.At.Before(from) && !line.At.After(to) && !strings.HasPrefix(line.Text, "gc ") {
			fmt.Fprintf(&b, "%s +%6.1fms %.300s\n", p.Name(), ms(line.At.Sub(zero)), line.Text)
		}
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sigName(sig syscall.Signal) string {
	if sig == syscall.SIGKILL {
		return "SIGKILL"
	}
	return "SIGTERM"
}

// floorSync is the startup floor: a bare client-go informer's LIST+WATCH
// sync of the same pods.
func (h *harness) floorSync(n int, res *samples) {
	cs := kubernetes.NewForConfigOrDie(h.env.Config())
	start := time.Now()
	f := informers.NewSharedInformerFactory(cs, 0)
	f.Core().V1().Pods().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	res.add(fmt.Sprintf("startup → first action, %d pods", n), "s", "floor", time.Since(start).Seconds())
	cancel()
	f.Shutdown()
}

// poll waits for cond, checking every 100 ms.
func (h *harness) poll(what string, timeout time.Duration, cond func() bool) {
	h.tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			h.tb.Fatalf("%s: not within %v", what, timeout)
		}
		<-time.After(100 * time.Millisecond)
	}
}

// clean removes a scenario's objects (no garbage collector runs here).
func (h *harness) clean(ns string) {
	ctx := context.Background()
	_ = h.cs.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_ = h.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
}
