//go:build chaos || integration

package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/test/gobuild"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// Election timings for speed: the stop budget is 4s-2s-0.5s = 1.5s.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// shutdownTimeout bounds how long a term waits for its controller.
	shutdownTimeout = 2 * time.Second
	// exitDeadline: a replica told to stop (SIGTERM, or a lost lease under
	// the exit policy) that is still running this long after is stuck.
	exitDeadline = 15 * time.Second
	// handoffDeadline bounds waiting for a new leader's start.
	handoffDeadline = 30 * time.Second
	namespace       = "chaos"
)

var operatorBin = gobuild.New("./operator")

func buildOperator(t *testing.T) string {
	t.Helper()
	return operatorBin.Path(t)
}

// event is one line of the activity file.
type event struct {
	what string // ready, start, stop, write, exit
	id   string
	at   int64
	term int64
	res  string
	msg  string // a failed write's error, quoted
}

// replica is one operator process and its proxy.
type replica struct {
	id         string
	kubeconfig string
	proxy      *proxy
	cmd        *exec.Cmd
	done       chan struct{} // closed when cmd has been waited for
}

// cluster is three replicas sharing an activity file and a control dir.
type cluster struct {
	t        *testing.T
	env      *testenv.Env
	bin      string
	dir      string
	activity string
	policy   string
	lease    string
	replicas map[string]*replica
	ids      []string
	args     []string // more flags for every replica
	mu       sync.Mutex
	logf     func(string, ...any)
}

// newClusterWith starts three replicas competing for lease, each with
// args after the common flags.
func newClusterWith(t *testing.T, env *testenv.Env, policy, lease string, args []string) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{
		t: t, env: env, bin: buildOperator(t), dir: dir, policy: policy,
		activity: filepath.Join(dir, "activity"),
		lease:    lease,
		replicas: map[string]*replica{},
		args:     args,
		logf:     t.Logf,
	}
	if err := os.WriteFile(c.activity, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	admin := filepath.Join(dir, "admin.kubeconfig")
	if err := env.WriteKubeconfig(admin); err != nil {
		t.Fatal(err)
	}
	upstream := strings.TrimPrefix(env.APIServerURL(), "https://")
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("%s-r%d", policy, i)
		p, err := newProxy(upstream)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.close)
		kc, err := clientcmd.LoadFromFile(admin)
		if err != nil {
			t.Fatal(err)
		}
		for _, cl := range kc.Clusters {
			cl.Server = "https://" + p.addr()
		}
		path := filepath.Join(dir, id+".kubeconfig")
		if err := clientcmd.WriteToFile(*kc, path); err != nil {
			t.Fatal(err)
		}
		c.replicas[id] = &replica{id: id, kubeconfig: path, proxy: p}
		c.ids = append(c.ids, id)
	}
	t.Cleanup(c.stopAll)
	for _, id := range c.ids {
		c.start(id)
	}
	return c
}

func (c *cluster) appendLine(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.OpenFile(c.activity, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		c.t.Error(err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n", args...)
}

// start runs replica id and records "exit" when the process ends, so a
// killed replica's open interval ends there.
func (c *cluster) start(id string) {
	r := c.replicas[id]
	logf, err := os.OpenFile(filepath.Join(c.dir, id+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.bin, append([]string{
		"--identity=" + id,
		"--activity-file=" + c.activity,
		"--control-dir=" + c.dir,
		"--namespace=" + namespace,
		"--kubeconfig=" + r.kubeconfig,
		"--secure-port=0",
		"--leader-elect-resource-name=" + c.lease,
		"--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=" + renewDeadline.String(),
		"--leader-elect-retry-period=" + retryPeriod.String(),
		"--leader-elect-lost-lease-policy=" + c.policy,
		"--controller-shutdown-timeout=" + shutdownTimeout.String(),
	}, c.args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		c.t.Fatal(err)
	}
	done := make(chan struct{})
	r.cmd, r.done = cmd, done
	go func() {
		_ = cmd.Wait()
		logf.Close()
		c.appendLine("exit %s %d", id, time.Now().UnixNano())
		close(done)
	}()
}

func (c *cluster) running(id string) bool {
	r := c.replicas[id]
	if r.cmd == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// waitExit waits up to d for replica id to exit.
func (c *cluster) waitExit(id string, d time.Duration) bool {
	r := c.replicas[id]
	if r.cmd == nil {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-r.done:
		return true
	case <-timer.C:
		return false
	}
}

func (c *cluster) signal(id string, sig syscall.Signal) {
	if c.running(id) {
		_ = c.replicas[id].cmd.Process.Signal(sig)
	}
}

// restartExited starts every replica whose process has ended.
func (c *cluster) restartExited() {
	for _, id := range c.ids {
		if !c.running(id) {
			c.start(id)
		}
	}
}

func (c *cluster) stopAll() {
	for _, id := range c.ids {
		c.signal(id, syscall.SIGKILL)
	}
	for _, id := range c.ids {
		c.waitExit(id, exitDeadline)
	}
}

func (c *cluster) control(id, what string, on bool) {
	path := filepath.Join(c.dir, id+"."+what)
	if on {
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			c.t.Fatal(err)
		}
		return
	}
	_ = os.Remove(path)
}

func (c *cluster) events() []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, err := os.ReadFile(c.activity)
	if err != nil {
		c.t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	// The last piece is empty or a line still being written: skip it.
	lines = lines[:len(lines)-1]
	out := make([]event, 0, len(lines))
	for _, line := range lines {
		fs := strings.Fields(line)
		if len(fs) < 3 {
			continue
		}
		e := event{what: fs[0], id: fs[1]}
		e.at, _ = strconv.ParseInt(fs[2], 10, 64)
		if len(fs) > 3 {
			e.term, _ = strconv.ParseInt(fs[3], 10, 64)
		}
		if len(fs) > 4 {
			e.res = fs[4]
		}
		if len(fs) > 5 {
			e.msg = strings.Join(fs[5:], " ")
		}
		out = append(out, e)
	}
	return out
}

// leader returns the replica with an open active interval, if any.
func (c *cluster) leader() (string, bool) {
	open := map[string]bool{}
	for _, e := range c.events() {
		switch e.what {
		case "start":
			open[e.id] = true
		case "stop", "exit":
			open[e.id] = false
		}
	}
	for _, id := range c.ids {
		if open[id] {
			return id, true
		}
	}
	return "", false
}

func (c *cluster) waitLeader(d time.Duration) (string, bool) {
	var id string
	if !poll.For(d, func() bool {
		var ok bool
		id, ok = c.leader()
		return ok
	}) {
		return "", false
	}
	return id, true
}

// startAfter is a condition: a start by a replica other than not, after t.
func startAfter(t int64, not string) func(event) bool {
	return func(e event) bool { return e.what == "start" && e.id != not && e.at > t }
}

// endAfter: replica id's interval ended (stop or process exit) after t.
func endAfter(t int64, id string) func(event) bool {
	return func(e event) bool { return (e.what == "stop" || e.what == "exit") && e.id == id && e.at > t }
}

// handoff waits for both an end of id and a start by another after t,
// up to d, returning what it saw.
func (c *cluster) handoff(t int64, id string, d time.Duration) (stop, start event, stopped, started bool) {
	isStop, isStart := endAfter(t, id), startAfter(t, id)
	poll.For(d, func() bool {
		for _, e := range c.events() {
			if !stopped && isStop(e) {
				stop, stopped = e, true
			}
			if !started && isStart(e) {
				start, started = e, true
			}
		}
		return stopped && started
	})
	return
}
