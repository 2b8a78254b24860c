//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/test/gobuild"
)

var dropIn = gobuild.New("github.com/ctrlhost/ctrlhost/upstream/cmd/kube-controller-manager").RaceLikeTest()

// logEntry is one JSON log line of a drop-in process.
type logEntry struct {
	at   time.Time
	msg  string
	term string
}

// process is one drop-in kube-controller-manager, its log parsed as it
// comes.
type process struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd

	mu   sync.Mutex
	logs []logEntry
	tail bytes.Buffer // the last lines, for failures

	exited chan struct{}
	err    error
}

// startProcess runs the drop-in with args plus JSON logging.
func startProcess(t testing.TB, name string, args ...string) *process {
	t.Helper()
	p := &process{t: t, name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(dropIn.Path(t), append(args, "--logging-format=json", "--v=2")...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		p.read(stderr)
	}()
	go func() {
		<-copied
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (p *process) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var raw struct {
			TS   float64 `json:"ts"`
			Msg  string  `json:"msg"`
			Term string  `json:"term"`
		}
		p.mu.Lock()
		if json.Unmarshal(line, &raw) == nil && raw.TS > 0 {
			p.logs = append(p.logs, logEntry{at: time.UnixMilli(int64(raw.TS)), msg: raw.Msg, term: raw.Term})
		}
		if p.tail.Len() > 64<<10 {
			p.tail.Reset()
		}
		p.tail.Write(line)
		p.tail.WriteByte('\n')
		p.mu.Unlock()
	}
}

// find returns the first log entry with msg (and term, if not empty) at or
// after since.
func (p *process) find(msg, term string, since time.Time) (logEntry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.logs {
		if e.msg == msg && (term == "" || e.term == term) && !e.at.Before(since) {
			return e, true
		}
	}
	return logEntry{}, false
}

// waitLog waits for find to succeed.
func (p *process) waitLog(msg, term string, since time.Time, timeout time.Duration) logEntry {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if e, ok := p.find(msg, term, since); ok {
			return e
		}
		select {
		case <-p.exited:
			p.t.Fatalf("%s exited (%v) before logging %q; its last log lines:\n%s", p.name, p.err, msg, p.lastLines())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not log %q within %v; its last log lines:\n%s", p.name, msg, timeout, p.lastLines())
		}
	}
}

func (p *process) lastLines() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.tail.Bytes()
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}

// stop sends SIGTERM and waits for the exit, which must be clean.
func (p *process) stop(timeout time.Duration) time.Time {
	p.t.Helper()
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			p.t.Errorf("%s: exit after SIGTERM: %v; last log lines:\n%s", p.name, p.err, p.lastLines())
		}
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %v of SIGTERM; last log lines:\n%s", p.name, timeout, p.lastLines())
	}
	return sent
}

// probe creates a one-replica ReplicaSet and waits until a controller made
// its pod: proof that some replica acts, not only that it holds the lease.
func probe(t testing.TB, cs kubernetes.Interface, ns, name string, timeout time.Duration) {
	t.Helper()
	labels := map[string]string{"probe": name}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if _, err := cs.AppsV1().ReplicaSets(ns).Create(context.Background(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "probe=" + name})
		if err == nil && len(pods.Items) == 1 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("probe %s: no pod within %v (last list: %v)", name, timeout, err)
		}
	}
}

// TestTwoReplicasHandOff: two drop-in replicas under leader election on
// KCM's default durations; SIGTERM on the leader hands its lease over at
// once (well before the 15 s it would take to expire), the new leader acts
// on a probe object, and the two never run controllers at the same time.
func TestTwoReplicasHandOff(t *testing.T) {
	env := sharedEnv(t)
	cs := kubernetes.NewForConfigOrDie(env.Config())
	ns := namespace(t, cs)
	lease := "it-dropin-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	args := append(commandLine(t, env),
		"--leader-elect-resource-name="+lease, // its own lock in the shared API server
		"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s",
	)

	start := time.Now()
	a := startProcess(t, "replica-a", args...)
	aUp := a.waitLog("Starting controllers", "main", start, 3*time.Minute)
	probe(t, cs, ns, "before", time.Minute)
	b := startProcess(t, "replica-b", args...)
	b.waitLog("Campaigning for the lease", "", start, 3*time.Minute)

	sent := a.stop(time.Minute)
	aDown := a.waitLog("All controllers stopped", "main", aUp.at, time.Second)
	bUp := b.waitLog("Starting controllers", "main", start, time.Minute)
	if handoff := bUp.at.Sub(sent); handoff >= 15*time.Second {
		t.Errorf("replica-b started %v after the SIGTERM: the lease was not released, it expired", handoff)
	} else {
		t.Logf("handoff: SIGTERM → replica-b starting controllers in %v", handoff)
	}
	if bUp.at.Before(aDown.at) {
		t.Errorf("overlap: replica-b started controllers at %v, before replica-a stopped its own at %v",
			bUp.at.Format(time.StampMicro), aDown.at.Format(time.StampMicro))
	}
	probe(t, cs, ns, "after", time.Minute)
	b.stop(time.Minute)
}
