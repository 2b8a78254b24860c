//go:build integration

package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctrlhost/ctrlhost/internal/poll"
	leaderpkg "github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/test/gobuild"
)

// replicas runs controller-manager replicas (test/integration/replica) as
// separate processes against one API server.
type replicas struct {
	tb         testing.TB
	bin        string
	kubeconfig string
	activity   string
	lease      string
	args       []string // more flags for every replica
	mu         sync.Mutex
	procs      map[string]*exec.Cmd
	exited     map[string]chan error
	killedAt   map[string]time.Time
}

var replicaBin = gobuild.New("./replica")

// buildReplica compiles the replica program once per test binary.
func buildReplica(tb testing.TB) string {
	tb.Helper()
	return replicaBin.Path(tb)
}

func newReplicas(tb testing.TB, kubeconfig, lease string) *replicas {
	r := &replicas{
		tb: tb, bin: buildReplica(tb), kubeconfig: kubeconfig, lease: lease,
		activity: filepath.Join(tb.TempDir(), "activity.log"),
		procs:    map[string]*exec.Cmd{}, exited: map[string]chan error{}, killedAt: map[string]time.Time{},
	}
	tb.Cleanup(r.stopAll)
	return r
}

func (r *replicas) start(identity string) {
	r.tb.Helper()
	cmd := exec.Command(r.bin, append([]string{
		"--kubeconfig=" + r.kubeconfig,
		"--identity=" + identity,
		"--activity-file=" + r.activity,
		"--secure-port=0",
		"--leader-elect-resource-name=" + r.lease,
	}, r.args...)...)
	cmd.Stderr = &prefixLog{tb: r.tb, prefix: identity}
	if err := cmd.Start(); err != nil {
		r.tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	r.mu.Lock()
	r.procs[identity], r.exited[identity] = cmd, done
	r.mu.Unlock()
	r.waitFor(identity+" ready", 60*time.Second, func() (event, bool) {
		for _, e := range r.events() {
			if e.what == "ready" && e.identity == identity {
				return e, true
			}
		}
		return event{}, false
	})
}

// signal sends sig and waits for the process to exit.
func (r *replicas) signal(identity string, sig syscall.Signal) (sent time.Time, err error) {
	r.mu.Lock()
	cmd, done := r.procs[identity], r.exited[identity]
	delete(r.procs, identity)
	r.mu.Unlock()
	sent = time.Now()
	if sig == syscall.SIGKILL {
		r.mu.Lock()
		r.killedAt[identity] = sent
		r.mu.Unlock()
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return sent, err
	}
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		err = fmt.Errorf("%s did not exit within 60s of %v", identity, sig)
	}
	if sig == syscall.SIGKILL {
		err = nil // a killed process exits non-zero by definition
	}
	return sent, err
}

func (r *replicas) stopAll() {
	r.mu.Lock()
	ids := make([]string, 0, len(r.procs))
	for id := range r.procs {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, id := range ids {
		if _, err := r.signal(id, syscall.SIGTERM); err != nil {
			r.tb.Errorf("stopping %s: %v", id, err)
		}
	}
}

type event struct {
	what, identity string
	at             time.Time
}

func (r *replicas) events() []event {
	f, err := os.Open(r.activity)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		r.tb.Fatal(err)
	}
	defer f.Close()
	var out []event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if len(parts) != 3 {
			continue
		}
		ns, _ := strconv.ParseInt(parts[2], 10, 64)
		out = append(out, event{parts[0], parts[1], time.Unix(0, ns)})
	}
	return out
}

// startedAfter returns the first start by someone other than not, after t.
func (r *replicas) startedAfter(t time.Time, not string) (event, bool) {
	for _, e := range r.events() {
		if e.what == "start" && e.identity != not && e.at.After(t) {
			return e, true
		}
	}
	return event{}, false
}

// waitFor polls the activity file until cond finds an event.
func (r *replicas) waitFor(what string, timeout time.Duration, cond func() (event, bool)) event {
	r.tb.Helper()
	var e event
	if !poll.For(timeout, func() bool {
		var ok bool
		e, ok = cond()
		return ok
	}) {
		r.tb.Fatalf("no %s within %v; activity: %+v", what, timeout, r.events())
	}
	return e
}

// assertNoOverlap checks from the activity file (a SIGKILLed replica's
// interval ends when it was killed) that no two replicas ever ran the
// controller at once.
func (r *replicas) assertNoOverlap() {
	r.tb.Helper()
	type iv struct {
		id         string
		start, end time.Time
	}
	open := map[string]time.Time{}
	var ivs []iv
	for _, e := range r.events() {
		switch e.what {
		case "start":
			open[e.identity] = e.at
		case "stop":
			ivs = append(ivs, iv{e.identity, open[e.identity], e.at})
			delete(open, e.identity)
		}
	}
	r.mu.Lock()
	for id, start := range open {
		end, killed := r.killedAt[id]
		if !killed {
			end = time.Now()
		}
		ivs = append(ivs, iv{id, start, end})
	}
	r.mu.Unlock()
	slices.SortFunc(ivs, func(a, b iv) int { return a.start.Compare(b.start) })
	for i := 1; i < len(ivs); i++ {
		if ivs[i].start.Before(ivs[i-1].end) {
			r.tb.Errorf("overlap: %s ran %v–%v while %s ran %v–%v", ivs[i-1].id, ivs[i-1].start, ivs[i-1].end, ivs[i].id, ivs[i].start, ivs[i].end)
		}
	}
}

type prefixLog struct {
	tb     testing.TB
	prefix string
	mu     sync.Mutex
}

func (p *prefixLog) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if testing.Verbose() {
		for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			fmt.Fprintf(os.Stderr, "    [%s] %s\n", p.prefix, l)
		}
	}
	return len(b), nil
}

// TestLeaderElectionAcrossProcesses: three replicas in separate processes
// with KCM's default durations. SIGTERM on the leader hands over through the
// released lease (well before the lease could expire); SIGKILL fails over
// once the lease expires; no two replicas ever run the controller at once.
func TestLeaderElectionAcrossProcesses(t *testing.T) {
	env := sharedEnv(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	r := newReplicas(t, kubeconfig, "it-election-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	for _, id := range []string{"a", "b", "c"} {
		r.start(id)
	}
	first := r.waitFor("first leader", 60*time.Second, func() (event, bool) { return r.startedAfter(time.Time{}, "") })

	sent, err := r.signal(first.identity, syscall.SIGTERM)
	if err != nil {
		t.Fatalf("SIGTERM %s: %v", first.identity, err)
	}
	// Handing over through a released lease must not wait out the lease.
	second := r.waitFor("leader after SIGTERM", leaderpkg.DefaultLeaseDuration, func() (event, bool) { return r.startedAfter(sent, first.identity) })
	t.Logf("graceful handoff %s → %s: %v after SIGTERM", first.identity, second.identity, second.at.Sub(sent))

	killed, _ := r.signal(second.identity, syscall.SIGKILL)
	third := r.waitFor("leader after SIGKILL", leaderpkg.DefaultLeaseDuration+leaderpkg.DefaultRetryPeriod+5*time.Second,
		func() (event, bool) { return r.startedAfter(killed, second.identity) })
	t.Logf("crash failover %s → %s: %v after SIGKILL (lease %v, retry %v)", second.identity, third.identity, third.at.Sub(killed),
		leaderpkg.DefaultLeaseDuration, leaderpkg.DefaultRetryPeriod)
	r.stopAll()
	r.assertNoOverlap()
}

// BenchmarkLeaderFailover measures, with KCM's default durations and three
// replica processes, how long the controller is without a leader after
// SIGTERM (graceful handoff through the released lease) and after SIGKILL
// (crash failover once the lease expires): median and worst of 10 runs each.
// It runs once whatever b.N is (use -benchtime 1x) and prints a table.
func BenchmarkLeaderFailover(b *testing.B) {
	const rounds = 10
	env := sharedEnv(b)
	kubeconfig := filepath.Join(b.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		b.Fatal(err)
	}
	r := newReplicas(b, kubeconfig, "bench-election-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	next := 0
	spawn := func() {
		r.start(fmt.Sprintf("r%d", next))
		next++
	}
	for range 3 {
		spawn()
	}
	leader := r.waitFor("first leader", 60*time.Second, func() (event, bool) { return r.startedAfter(time.Time{}, "") })
	measure := func(sig syscall.Signal, timeout time.Duration) []time.Duration {
		var out []time.Duration
		for range rounds {
			sent, err := r.signal(leader.identity, sig)
			if err != nil {
				b.Fatalf("%v %s: %v", sig, leader.identity, err)
			}
			prev := leader.identity
			leader = r.waitFor("next leader", timeout, func() (event, bool) { return r.startedAfter(sent, prev) })
			out = append(out, leader.at.Sub(sent))
			spawn() // keep three replicas
		}
		return out
	}
	b.ResetTimer()
	graceful := measure(syscall.SIGTERM, time.Minute)
	crash := measure(syscall.SIGKILL, time.Minute)
	b.StopTimer()
	r.stopAll()
	r.assertNoOverlap()

	stats := func(d []time.Duration) (median, worst time.Duration) {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2], s[len(s)-1]
	}
	gm, gw := stats(graceful)
	cm, cw := stats(crash)
	fmt.Printf("\nleader failover, 3 replica processes, lease %v / renew %v / retry %v, %d runs each\n",
		leaderpkg.DefaultLeaseDuration, leaderpkg.DefaultRenewDeadline, leaderpkg.DefaultRetryPeriod, rounds)
	fmt.Printf("%-28s %12s %12s\n", "scenario", "median", "worst")
	fmt.Printf("%-28s %12v %12v\n", "graceful handoff (SIGTERM)", gm.Round(time.Millisecond), gw.Round(time.Millisecond))
	fmt.Printf("%-28s %12v %12v\n", "crash failover (SIGKILL)", cm.Round(time.Millisecond), cw.Round(time.Millisecond))
	b.ReportMetric(float64(gm.Milliseconds()), "handoff-median-ms")
	b.ReportMetric(float64(gw.Milliseconds()), "handoff-worst-ms")
	b.ReportMetric(float64(cm.Milliseconds()), "failover-median-ms")
	b.ReportMetric(float64(cw.Milliseconds()), "failover-worst-ms")
}
