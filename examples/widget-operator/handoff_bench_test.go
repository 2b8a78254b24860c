//go:build integration

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/examples/widget-operator/api/v1alpha1"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// leaseName is the Lease both operators elect on: ctrlhost names it after
// the component, controller-runtime's binary takes --leader-elect-id.
const leaseName = "widget-operator"

const (
	handoffPoll     = 5 * time.Millisecond // polling the Lease and the probe's ConfigMap
	handoffDeadline = time.Minute          // any wait: start, election, handoff, exit
	buildDeadline   = 5 * time.Minute
)

// identityRE finds the identity ctrlhost logs when it starts campaigning,
// in the text format ({"identity": "..."}) or as key=value.
var identityRE = regexp.MustCompile(`identity"?\s*[:=]\s*"([^"]+)"`)

// handoffVariant is one operator binary and the flags it runs with.
type handoffVariant struct {
	name  string
	build []string // the go command's arguments, before "-o <bin> ."
	args  func(kubeconfig, ns string) []string
	// up is logged once a replica campaigns for the Lease: it is up, a
	// follower unless it acquires; leading is logged once it acquired it.
	up, leading string
	// warm, if set, is logged once a follower's caches are warm; a round
	// does not start before the follower logged it.
	warm string
	// identity reads the replica's Lease identity from its log, or is nil
	// when the binary does not log it (then the identity is learnt from
	// the Lease once the replica's log says it acquired it).
	identity func(log string) string
	// exitZero: a non-zero exit on SIGTERM is an error, not just reported.
	exitZero bool
}

func handoffVariants() []handoffVariant {
	cr := func(release bool) func(kubeconfig, ns string) []string {
		return func(kubeconfig, ns string) []string {
			return []string{
				"--kubeconfig=" + kubeconfig,
				"--leader-elect-release-on-cancel=" + strconv.FormatBool(release),
				"--health-probe-bind-address=0",
				"--leader-election-namespace=" + ns,
			}
		}
	}
	crVariant := func(name string, release bool) handoffVariant {
		return handoffVariant{
			name:  name,
			build: []string{"-C", "controllerruntime", "build"},
			args:  cr(release),
			// client-go's leaderelection, through klog.
			up:      "Attempting to acquire leader lease",
			leading: "Successfully acquired lease",
		}
	}
	ctrlhost := func(name, warm string, extra ...string) handoffVariant {
		return handoffVariant{
			warm:  warm,
			name:  name,
			build: []string{"build"},
			args: func(kubeconfig, ns string) []string {
				return append([]string{
					"--kubeconfig=" + kubeconfig,
					"--secure-port=0",
					"--leader-elect-resource-namespace=" + ns,
				}, extra...)
			},
			up:      "Campaigning for the lease",
			leading: "Became leader; starting term",
			identity: func(log string) string {
				for _, line := range strings.Split(log, "\n") {
					if !strings.Contains(line, "Campaigning for the lease") {
						continue
					}
					if m := identityRE.FindStringSubmatch(line); m != nil {
						return m[1]
					}
				}
				return ""
			},
			exitZero: true,
		}
	}
	return []handoffVariant{
		ctrlhost("ctrlhost", ""),
		// The follower keeps the declared informers (Widgets, Secrets,
		// ConfigMaps) synced, so the new leader acts on warm caches.
		ctrlhost("ctrlhost-warm-standby", "Warm standby: caches synced", "--leader-elect-warm-standby"),
		crVariant("controller-runtime", false),
		crVariant("controller-runtime-release-on-cancel", true),
	}
}

// handoffResult is what one variant measured.
type handoffResult struct {
	handoff, acts []time.Duration
	exits         []int // exit codes of the replicas sent SIGTERM
}

// BenchmarkOperatorHandoff measures, for two replicas of the widget
// operator on ctrlhost and of the same operator on controller-runtime
// (without and with LeaderElectionReleaseOnCancel), each replica a process
// of its own with KCM's default Lease durations (15s/10s/2s), how long
// after SIGTERM to the leader (a) the Lease names the other replica
// (handoff) and (b) the other replica has acted: the ConfigMap of a Widget
// created just after the signal exists (acts). Each round restarts the
// terminated replica and waits until it is up as a follower. Rounds:
// $BENCH_ROUNDS (default 3). It reports the medians (handoff-s, acts-s) and
// prints a markdown table. Run it with -benchtime 1x.
//
// The leader process is told from the Lease by each replica's log:
// ctrlhost logs its identity (host name, "_", a UUID) when it starts
// campaigning, so every replica's identity is known before it leads;
// controller-runtime's binary does not log its identity (nor take one), so
// the leader is the replica whose log says it acquired the Lease (client-go's
// "Successfully acquired lease", logged once per process, and a
// controller-runtime replica that loses the Lease exits), and its identity
// is the Lease's holder at that time. A handoff is then the holder becoming
// neither empty nor the terminated leader's identity (with two replicas,
// the other's), confirmed afterwards by the other replica's log.
func BenchmarkOperatorHandoff(b *testing.B) {
	rounds := 3
	if s := os.Getenv("BENCH_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("BENCH_ROUNDS=%q: want a positive integer", s)
		}
		rounds = n
	}
	ctx := b.Context()
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := env.Stop(); err != nil {
			b.Error(err)
		}
	})
	if err := env.InstallCRDFiles(ctx, "config/crd.yaml"); err != nil {
		b.Fatal(err)
	}
	kubeconfig := filepath.Join(b.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		b.Fatal(err)
	}
	cfg := env.Config()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(hc.CloseIdleConnections)
	kube, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		b.Fatal(err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		b.Fatal(err)
	}
	variants := handoffVariants()
	for _, v := range variants {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "handoff-" + v.name}}
		_, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
	}

	results := map[string]*handoffResult{}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			h := &handoffBench{b: b, v: v, ns: "handoff-" + v.name, kubeconfig: kubeconfig,
				kube: kube, dyn: dyn}
			r := &handoffResult{}
			results[v.name] = r // partial if the variant fails
			h.run(rounds, r)
			b.ReportMetric(median(r.handoff).Seconds(), "handoff-s")
			b.ReportMetric(median(r.acts).Seconds(), "acts-s")
		})
	}
	printHandoffTable(variants, results, rounds)
}

// handoffBench runs one variant's replicas.
type handoffBench struct {
	b          *testing.B
	v          handoffVariant
	ns         string // the Lease's, and the Widgets'
	kubeconfig string
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	bin, dir   string
	next       int      // the next replica's number
	widgets    []string // the Widgets created

	mu       sync.Mutex
	replicas []*handoffReplica // started and not yet reaped by stop
}

// handoffReplica is one operator process.
type handoffReplica struct {
	name     string
	cmd      *exec.Cmd
	log      string
	done     chan struct{} // closed once the process has exited
	err      error         // Wait's result; read only after done is closed
	identity string        // its Lease identity, once known
}

func (r *handoffReplica) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *handoffReplica) readLog() string {
	data, _ := os.ReadFile(r.log)
	return string(data)
}

// tail is the end of the replica's log, for failure messages.
func (r *handoffReplica) tail() string {
	log := r.readLog()
	if len(log) > 4000 {
		log = "…" + log[len(log)-4000:]
	}
	return fmt.Sprintf("--- %s (%s) log:\n%s", r.name, r.log, log)
}

// run measures rounds handoffs into res.
func (h *handoffBench) run(rounds int, res *handoffResult) {
	b := h.b
	h.dir = b.TempDir()
	h.buildBinary()
	b.Cleanup(h.stopAll)
	h.start()
	h.start()
	leader := h.waitLeader()
	h.createWidget("warmup", map[string]string{"round": "warmup"})
	h.waitConfigMap("warmup", "warmup", time.Now())
	b.Logf("%s leads as %s", leader.name, leader.identity)

	b.ResetTimer()
	for round := range rounds {
		follower := h.other(leader)
		handoff, acts, exit := h.round(round, leader, follower)
		res.handoff = append(res.handoff, handoff)
		res.acts = append(res.acts, acts)
		res.exits = append(res.exits, exit)
		b.Logf("round %d: %s → %s: handoff %v, acts %v, exit code %d", round, leader.name,
			follower.name, handoff.Round(time.Millisecond), acts.Round(time.Millisecond), exit)
		leader = follower
		if round < rounds-1 {
			h.start() // two replicas again
		}
	}
	b.StopTimer()
	h.clearWidgets()
}

// round terminates the leader and measures the handoff to follower.
func (h *handoffBench) round(round int, leader, follower *handoffReplica) (
	handoff, acts time.Duration, exit int) {
	b := h.b
	name, value := "probe-"+strconv.Itoa(round), strconv.Itoa(round)
	old := leader.identity
	// The Lease is polled in a goroutine of its own, the ConfigMap in this
	// one; on failure, the goroutine is stopped and waited for.
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(b.Context())
	defer wg.Wait()
	defer cancel()
	var handoffErr error
	var released time.Duration // until the Lease was seen without a holder, if it was
	t0 := time.Now()
	if err := leader.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatalf("SIGTERM %s: %v", leader.name, err)
	}
	wg.Go(func() {
		handoffErr = poll(ctx, func(ctx context.Context) (bool, error) {
			holder, err := h.holder(ctx)
			if err == nil && holder == "" && released == 0 {
				released = time.Since(t0)
			}
			if err != nil || holder == "" || holder == old {
				return false, err
			}
			handoff = time.Since(t0)
			if follower.identity != "" && holder != follower.identity {
				return false, fmt.Errorf("the Lease went to %q, neither %s (%s) nor %s (%s)",
					holder, leader.name, old, follower.name, follower.identity)
			}
			if follower.identity == "" {
				follower.identity = holder
			}
			return true, nil
		})
	})
	h.createWidget(name, map[string]string{"round": value})
	acts = h.waitConfigMap(name, value, t0)
	wg.Wait()
	if handoffErr != nil {
		b.Fatalf("round %d: waiting for the Lease to leave %s: %v\n%s\n%s", round, leader.name,
			handoffErr, leader.tail(), follower.tail())
	}
	// The new holder is the follower: its log says so (the only other
	// process, the terminated leader, had no other identity).
	h.waitLog(follower, h.v.leading)
	if released != 0 {
		b.Logf("round %d: the Lease was released (no holder) %v after SIGTERM", round,
			released.Round(time.Millisecond))
	}
	exit = h.reap(leader)
	if exit != 0 {
		msg := fmt.Sprintf("round %d: %s exited with code %d (%v) after SIGTERM",
			round, leader.name, exit, leader.err)
		if h.v.exitZero {
			b.Errorf("%s\n%s", msg, leader.tail())
		} else {
			b.Log(msg)
		}
	}
	return handoff, acts, exit
}

// buildBinary compiles the variant's operator into the temporary directory.
func (h *handoffBench) buildBinary() {
	b := h.b
	h.bin = filepath.Join(h.dir, "widget-operator")
	ctx, cancel := context.WithTimeout(b.Context(), buildDeadline)
	defer cancel()
	args := append(slices.Clone(h.v.build), "-o", h.bin, ".")
	if out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
		b.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// start runs one more replica and waits until it is up (campaigning).
func (h *handoffBench) start() *handoffReplica {
	b := h.b
	r := &handoffReplica{
		name: "r" + strconv.Itoa(h.next),
		done: make(chan struct{}),
	}
	h.next++
	r.log = filepath.Join(h.dir, r.name+".log")
	f, err := os.Create(r.log)
	if err != nil {
		b.Fatal(err)
	}
	r.cmd = exec.Command(h.bin, h.v.args(h.kubeconfig, h.ns)...)
	r.cmd.Stdout, r.cmd.Stderr = f, f
	err = r.cmd.Start()
	f.Close() // the child has its own descriptor
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	h.mu.Lock()
	h.replicas = append(h.replicas, r)
	h.mu.Unlock()
	h.waitLog(r, h.v.up)
	if h.v.warm != "" {
		h.waitLog(r, h.v.warm) // a follower that is still filling its caches is not warm yet
	}
	if h.v.identity != nil {
		if r.identity = h.v.identity(r.readLog()); r.identity == "" {
			b.Fatalf("no identity in %s's log\n%s", r.name, r.tail())
		}
	}
	return r
}

// waitLog waits until r's log contains line.
func (h *handoffBench) waitLog(r *handoffReplica, line string) {
	h.b.Helper()
	err := poll(h.b.Context(), func(context.Context) (bool, error) {
		if strings.Contains(r.readLog(), line) {
			return true, nil
		}
		if r.exited() {
			return false, fmt.Errorf("exited: %v", r.err)
		}
		return false, nil
	})
	if err != nil {
		h.b.Fatalf("waiting for %q in %s's log: %v\n%s", line, r.name, err, r.tail())
	}
}

// live are the replicas that have not exited.
func (h *handoffBench) live() []*handoffReplica {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*handoffReplica
	for _, r := range h.replicas {
		if !r.exited() {
			out = append(out, r)
		}
	}
	return out
}

// other is the live replica that is not r.
func (h *handoffBench) other(r *handoffReplica) *handoffReplica {
	live := slices.DeleteFunc(h.live(), func(x *handoffReplica) bool { return x == r })
	if len(live) != 1 {
		h.b.Fatalf("%d live replicas besides %s, want 1", len(live), r.name)
	}
	return live[0]
}

// waitLeader waits until the Lease has a holder and tells which replica it
// is (see BenchmarkOperatorHandoff).
func (h *handoffBench) waitLeader() *handoffReplica {
	b := h.b
	var leader *handoffReplica
	var holder string
	err := poll(b.Context(), func(ctx context.Context) (bool, error) {
		var err error
		if holder, err = h.holder(ctx); err != nil || holder == "" {
			return false, err
		}
		var leading []*handoffReplica
		for _, r := range h.live() {
			if r.identity == holder ||
				r.identity == "" && strings.Contains(r.readLog(), h.v.leading) {
				leading = append(leading, r)
			}
		}
		if len(leading) > 1 {
			return false, fmt.Errorf("%d replicas claim the Lease held by %s", len(leading), holder)
		}
		if len(leading) == 0 {
			return false, nil
		}
		leader = leading[0]
		leader.identity = holder
		return true, nil
	})
	if err != nil {
		var logs []string
		for _, r := range h.live() {
			logs = append(logs, r.tail())
		}
		b.Fatalf("waiting for a leader (Lease holder %q): %v\n%s", holder, err,
			strings.Join(logs, "\n"))
	}
	return leader
}

// holder is the Lease's holderIdentity, "" if none or no Lease yet.
func (h *handoffBench) holder(ctx context.Context) (string, error) {
	l, err := h.kube.CoordinationV1().Leases(h.ns).Get(ctx, leaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}

func (h *handoffBench) createWidget(name string, data map[string]string) {
	w := newWidget(name, data)
	w.Namespace = h.ns
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(w)
	if err != nil {
		h.b.Fatal(err)
	}
	_, err = h.dyn.Resource(v1alpha1.Resource).Namespace(h.ns).
		Create(h.b.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		h.b.Fatalf("creating Widget %s: %v", name, err)
	}
	h.widgets = append(h.widgets, name)
}

// clearWidgets deletes the variant's Widgets, waits until its leader has
// released them (their finalizer) and deletes their ConfigMaps (testenv
// runs no garbage collector), so that the next variant's operator, which
// watches every namespace, does not start with them on its queue.
func (h *handoffBench) clearWidgets() {
	ctx := h.b.Context()
	widgets := h.dyn.Resource(v1alpha1.Resource).Namespace(h.ns)
	for _, name := range h.widgets {
		err := widgets.Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			h.b.Fatalf("deleting Widget %s: %v", name, err)
		}
	}
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		l, err := widgets.List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
	if err != nil {
		h.b.Fatalf("waiting for the Widgets of %s to go: %v", h.ns, err)
	}
	for _, name := range h.widgets {
		err := h.kube.CoreV1().ConfigMaps(h.ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			h.b.Fatalf("deleting ConfigMap %s: %v", name, err)
		}
	}
}

// waitConfigMap waits until the Widget's ConfigMap holds round and returns
// the time since t0.
func (h *handoffBench) waitConfigMap(name, round string, t0 time.Time) time.Duration {
	var took time.Duration
	err := poll(h.b.Context(), func(ctx context.Context) (bool, error) {
		cm, err := h.kube.CoreV1().ConfigMaps(h.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		took = time.Since(t0)
		if cm.Data["round"] != round {
			return false, fmt.Errorf("ConfigMap %s has round %q, want %q",
				name, cm.Data["round"], round)
		}
		return true, nil
	})
	if err != nil {
		var logs []string
		for _, r := range h.live() {
			logs = append(logs, r.tail())
		}
		h.b.Fatalf("waiting for ConfigMap %s: %v\n%s", name, err, strings.Join(logs, "\n"))
	}
	return took
}

// reap waits for r to exit and returns its exit code (-1 if a signal ended
// it); past the deadline it kills r and fails.
func (h *handoffBench) reap(r *handoffReplica) int {
	select {
	case <-r.done:
	case <-time.After(handoffDeadline):
		_ = r.cmd.Process.Kill()
		<-r.done
		h.b.Errorf("%s did not exit within %v of SIGTERM; killed\n%s", r.name, handoffDeadline,
			r.tail())
	}
	h.mu.Lock()
	h.replicas = slices.DeleteFunc(h.replicas, func(x *handoffReplica) bool { return x == r })
	h.mu.Unlock()
	return r.cmd.ProcessState.ExitCode()
}

// stopAll terminates every replica left (SIGTERM, then SIGKILL after 15s)
// and waits for each to exit.
func (h *handoffBench) stopAll() {
	h.mu.Lock()
	left := slices.Clone(h.replicas)
	h.replicas = nil
	h.mu.Unlock()
	for _, r := range left {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, r := range left {
		select {
		case <-r.done:
		case <-time.After(15 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	}
}

// poll runs cond every handoffPoll until it is done, fails, or
// handoffDeadline passes.
func poll(ctx context.Context, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, handoffPoll, handoffDeadline, true, cond)
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(d))
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// printHandoffTable prints, as markdown, min/median/max of each variant's
// handoff and acts, and the ratio of each median to ctrlhost's.
func printHandoffTable(variants []handoffVariant, results map[string]*handoffResult, rounds int) {
	sec := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
	ratio := func(d, base time.Duration) string {
		if base <= 0 {
			return "–"
		}
		return strconv.FormatFloat(float64(d)/float64(base), 'f', 1, 64) + "×"
	}
	stats := func(d []time.Duration) string {
		return fmt.Sprintf("%s / %s / %s", sec(slices.Min(d)), sec(median(d)), sec(slices.Max(d)))
	}
	base := results["ctrlhost"]
	fmt.Printf("\nSIGTERM handoff, widget operator, 2 replica processes, lease 15s / renew 10s"+
		" / retry 2s, %d rounds; seconds, min / median / max\n\n", rounds)
	fmt.Println("| variant | handoff (s) | acts (s) | handoff ÷ ctrlhost | acts ÷ ctrlhost" +
		" | exit codes |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, v := range variants {
		r := results[v.name]
		if r == nil {
			continue // not selected by -bench
		}
		if len(r.handoff) < rounds {
			fmt.Printf("| %s | failed | | | | |\n", v.name)
			continue
		}
		hr, ar := "1.0×", "1.0×"
		if v.name != "ctrlhost" {
			hr, ar = "–", "–"
			if base != nil && len(base.handoff) == rounds {
				hr, ar = ratio(median(r.handoff), median(base.handoff)),
					ratio(median(r.acts), median(base.acts))
			}
		}
		codes := make([]string, len(r.exits))
		for i, c := range r.exits {
			codes[i] = strconv.Itoa(c)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", v.name, stats(r.handoff), stats(r.acts),
			hr, ar, strings.Join(codes, ","))
	}
	fmt.Println()
}
