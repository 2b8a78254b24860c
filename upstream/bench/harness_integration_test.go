//go:build integration

package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/test/gobuild"
	"github.com/ctrlhost/ctrlhost/test/procs"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// controllers are the ones both programs run: ctrlhost's native built-ins
// that are on by default, by the aliases both accept.
const controllers = "replicaset,replicationcontroller,podgc,serviceaccount,root-ca-cert-publisher,ttl-after-finished"

// program is one controller manager under test.
type program struct {
	name string
	bin  *gobuild.Program
	// extra flags after the common ones.
	extra []string
	// controllers overrides the --controllers every program runs.
	controllers string
	// follower is a line the program prints once it stands as a follower
	// (and, for warm standby, once its caches are synced).
	follower string
	// leads is a line the program prints once it holds the lease.
	leads string
}

var (
	ctrlhostBin = gobuild.New("github.com/ctrlhost/ctrlhost/examples/kcm")
	upstreamBin = gobuild.New("k8s.io/kubernetes/cmd/kube-controller-manager")

	ctrlhost     = program{name: "ctrlhost", bin: ctrlhostBin, follower: "Campaigning for the lease", leads: "Became leader"}
	ctrlhostWarm = program{name: "ctrlhost warm standby", bin: ctrlhostBin, extra: []string{"--leader-elect-warm-standby"},
		follower: "Warm standby: caches synced", leads: "Became leader"}
	upstream = program{name: "upstream", bin: upstreamBin, follower: "Attempting to acquire leader lease", leads: "Successfully acquired lease"}
)

// harness is one API server and what the scenarios share on it.
type harness struct {
	tb         testing.TB
	env        *testenv.Env
	cs         kubernetes.Interface // the bench's own client, fast
	kubeconfig string
	shardSlots int // --shard-slots of sharded programs
	// profileDir, when set (BENCH_HEAP_PROFILE), is where the startup
	// scenario saves each program's heap profile once it acted: the
	// programs then serve /debug/pprof on a loopback port.
	profileDir string
}

func newHarness(tb testing.TB, env *testenv.Env) *harness {
	tb.Helper()
	cfg := rest.CopyConfig(env.Config())
	cfg.QPS, cfg.Burst = 5000, 10000
	kubeconfig := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		tb.Fatal(err)
	}
	return &harness{tb: tb, env: env, cs: kubernetes.NewForConfigOrDie(cfg), kubeconfig: kubeconfig,
		profileDir: os.Getenv("BENCH_HEAP_PROFILE")}
}

// unique returns a name no earlier run used.
func unique(prefix string) string { return prefix + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) }

// namespace creates a namespace with its default ServiceAccount (nobody
// runs the service-account controller before the program does, and the
// admission plugin refuses pods without it).
func (h *harness) namespace(prefix string) string {
	h.tb.Helper()
	ctx := context.Background()
	ns, err := h.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		h.tb.Fatal(err)
	}
	if _, err := h.cs.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		h.tb.Fatal(err)
	}
	return ns.Name
}

// start runs one replica of p competing for lease, at the given client
// budget.
func (h *harness) start(p program, name, lease string, qps, burst int) *procs.Process {
	h.tb.Helper()
	return h.startWith(p, name, lease, qps, burst, "--secure-port=0")
}

// startProfiled is start with /debug/pprof served on a free loopback port,
// which it returns: both programs take KCM's serving flags, authenticate
// the bench's token through the API server, and let it reach the profiles
// without a SubjectAccessReview.
func (h *harness) startProfiled(p program, name, lease string, qps, burst int) (*procs.Process, int) {
	h.tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		h.tb.Fatal(err)
	}
	return h.startWith(p, name, lease, qps, burst, fmt.Sprintf("--secure-port=%d", port),
		"--bind-address=127.0.0.1", "--profiling",
		"--authentication-kubeconfig="+h.kubeconfig, "--authorization-kubeconfig="+h.kubeconfig,
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/debug/pprof/*"), port
}

// pprof GETs a /debug/pprof path of the program serving on port.
func (h *harness) pprof(port int, path string) []byte {
	h.tb.Helper()
	body, err := h.pprofErr(port, path)
	if err != nil {
		h.tb.Fatal(err)
	}
	return body
}

// pprofErr is pprof for a goroutine other than the benchmark's.
func (h *harness) pprofErr(port int, path string) ([]byte, error) {
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the program's self-signed pair
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", port, path), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+h.env.Config().BearerToken)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s, %v: %.200s", path, resp.Status, err, body)
	}
	return body, nil
}

var heapAllocLine = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)

// settledHeapMiB returns the live heap of the program serving on port once
// it has settled: it forces a collection every second and reads
// runtime.MemStats.HeapAlloc after it (as the heap profile's text form
// reports it), until two readings in a row differ by at most 1 % (or
// 1 MiB), or two minutes have passed. The first action comes while other
// controllers still work through their initial lists (queues full, event
// handlers' buffers, the garbage collector's graph being built), so one
// reading right after it measures startup's transients, not what the
// program holds.
func (h *harness) settledHeapMiB(port int) float64 {
	h.tb.Helper()
	read := func() float64 {
		body := h.pprof(port, "/debug/pprof/heap?gc=1&debug=1")
		m := heapAllocLine.FindSubmatch(body)
		if m == nil {
			h.tb.Fatalf("no HeapAlloc in the heap profile's text form: %.300s", body)
		}
		b, _ := strconv.ParseFloat(string(m[1]), 64)
		return b / (1 << 20)
	}
	last := read()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		<-tick.C
		now := read()
		if math.Abs(now-last) <= max(1, last/100) {
			return now
		}
		last = now
	}
	h.tb.Logf("the heap did not settle within two minutes; last reading %.1f MiB", last)
	return last
}

// cpuProfile saves a CPU profile of the program serving on port, taken
// over BENCH_CPU_PROFILE seconds from as soon as it answers, as
// <profileDir>/<file>.
func (h *harness) cpuProfile(port int, file string) {
	h.tb.Helper()
	var dialErr error
	serving := poll.For(time.Minute, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if dialErr = err; err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
	if !serving {
		h.tb.Errorf("cpu profile: the program did not serve within a minute: %v", dialErr)
		return
	}
	body, err := h.pprofErr(port, "/debug/pprof/profile?seconds="+os.Getenv("BENCH_CPU_PROFILE"))
	if err != nil {
		h.tb.Errorf("cpu profile: %v", err)
		return
	}
	if err := os.MkdirAll(h.profileDir, 0o755); err != nil {
		h.tb.Error(err)
		return
	}
	if err := os.WriteFile(filepath.Join(h.profileDir, file), body, 0o644); err != nil {
		h.tb.Error(err)
	}
}

// heapProfile saves the heap profile of the program serving on port (after
// a collection) as <profileDir>/<file>.
func (h *harness) heapProfile(port int, file string) {
	h.tb.Helper()
	body := h.pprof(port, "/debug/pprof/heap?gc=1")
	if err := os.MkdirAll(h.profileDir, 0o755); err != nil {
		h.tb.Fatal(err)
	}
	path := filepath.Join(h.profileDir, file)
	if err := os.WriteFile(path, body, 0o644); err != nil {
		h.tb.Fatal(err)
	}
	h.tb.Logf("heap profile: %s", path)
}

func (h *harness) startWith(p program, name, lease string, qps, burst int, serving ...string) *procs.Process {
	h.tb.Helper()
	ctrls := controllers
	if p.controllers != "" {
		ctrls = p.controllers
	}
	args := append([]string{
		"--kubeconfig=" + h.kubeconfig, "--controllers=" + ctrls,
		"--leader-elect=true", "--leader-elect-resource-name=" + lease,
		fmt.Sprintf("--kube-api-qps=%d", qps), fmt.Sprintf("--kube-api-burst=%d", burst),
	}, append(serving, p.extra...)...)
	// gctrace prints the live heap after every collection, for both
	// programs alike, without serving /metrics.
	return procs.StartEnv(h.tb, name, []string{"GODEBUG=gctrace=1"}, p.bin.Path(h.tb), args...)
}

var podTemplate = corev1.PodTemplateSpec{
	Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
}

func replicaSet(name string, replicas int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	tpl := *podTemplate.DeepCopy()
	tpl.Labels = labels
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: tpl,
		},
	}
}

// probe is a one-replica ReplicaSet whose pod is the program's first
// action; act reports when that pod was created, as the API server's
// watch delivered it.
type probe struct {
	act <-chan time.Time
	w   watch.Interface
}

// newProbe starts watching for the probe's pod; create makes the probe.
func (h *harness) newProbe(ns string) (p *probe, create func()) {
	h.tb.Helper()
	name := unique("probe")
	w, err := h.cs.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		h.tb.Fatal(err)
	}
	act := make(chan time.Time, 1)
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				act <- time.Now()
				return
			}
		}
	}()
	return &probe{act: act, w: w}, func() {
		if _, err := h.cs.AppsV1().ReplicaSets(ns).Create(context.Background(), replicaSet(name, 1), metav1.CreateOptions{}); err != nil {
			h.tb.Fatal(err)
		}
	}
}

// wait returns when the probe's pod appeared; on a timeout it fails with
// the last lines of the processes that should have acted.
func (p *probe) wait(tb testing.TB, timeout time.Duration, actors ...*procs.Process) time.Time {
	tb.Helper()
	defer p.w.Stop()
	select {
	case at := <-p.act:
		return at
	case <-time.After(timeout):
		var tails strings.Builder
		for _, a := range actors {
			fmt.Fprintf(&tails, "--- %s:\n%s\n", a.Name(), a.LastLines())
		}
		tb.Fatalf("no probe pod within %v\n%s", timeout, tails.String())
		return time.Time{}
	}
}

// createPods stores n bare pods in ns, in parallel.
func (h *harness) createPods(ns string, from, to int) {
	h.tb.Helper()
	const workers = 64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("stored-%d", i)}, Spec: podTemplate.Spec}
				if _, err := h.cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		h.tb.Fatal(err)
	default:
	}
}

// memory is a process's footprint at one moment.
type memory struct {
	rssMiB     float64
	peakRSSMiB float64 // the most RSS the process ever had (VmHWM)
	heapMiB    float64 // live heap after the last GC, from gctrace
}

var gcLine = regexp.MustCompile(`gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

func measureMemory(tb testing.TB, p *procs.Process) memory {
	tb.Helper()
	var m memory
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			m.rssMiB = kb / 1024
		case "VmHWM:":
			m.peakRSSMiB = kb / 1024
		}
	}
	lines := p.Lines()
	for i := len(lines) - 1; i >= 0; i-- {
		if g := gcLine.FindStringSubmatch(lines[i].Text); g != nil {
			mb, _ := strconv.ParseFloat(g[3], 64)
			m.heapMiB = mb
			break
		}
	}
	return m
}

// samples collects one value per round for each row and program.
type samples struct {
	mu   sync.Mutex
	rows []string
	vals map[string]map[string][]float64 // row → program → values
	unit map[string]string
}

func newSamples() *samples {
	return &samples{vals: map[string]map[string][]float64{}, unit: map[string]string{}}
}

func (s *samples) add(row, unit, prog string, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.vals[row]; !ok {
		s.rows = append(s.rows, row)
		s.vals[row] = map[string][]float64{}
		s.unit[row] = unit
	}
	s.vals[row][prog] = append(s.vals[row][prog], v)
}

// get returns the values of one row and program.
func (s *samples) get(row, prog string) []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]float64(nil), s.vals[row][prog]...)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// table renders the samples: per row, each program's median and worst
// (the largest: every row is a time or a size) and ctrlhost's medians over
// upstream's.
func (s *samples) table() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	b.WriteString("| scenario | unit | ctrlhost median (worst) | ctrlhost warm standby median (worst) | upstream median (worst) | floor | ctrlhost / upstream | warm / upstream |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	cell := func(v []float64) string {
		if len(v) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.3g (%.3g)", median(v), slices.Max(v))
	}
	ratio := func(a, b []float64) string {
		if len(a) == 0 || len(b) == 0 || median(b) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.3g", median(a)/median(b))
	}
	for _, row := range s.rows {
		v := s.vals[row]
		floor := "–"
		if f := v["floor"]; len(f) > 0 {
			floor = fmt.Sprintf("%.3g", median(f))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", row, s.unit[row],
			cell(v[ctrlhost.name]), cell(v[ctrlhostWarm.name]), cell(v[upstream.name]), floor,
			ratio(v[ctrlhost.name], v[upstream.name]), ratio(v[ctrlhostWarm.name], v[upstream.name]))
	}
	return b.String()
}
