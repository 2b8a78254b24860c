// Package procs runs programs under test as child processes and reads
// their JSON logs (--logging-format=json) as they come, for integration
// tests that need several processes: replicas handing a lease over, or the
// components of a leader migration.
//
// Guarantees: every wait has a deadline and fails the test with the
// process's last log lines; a process still running when its test ends is
// killed and waited for. Non-guarantees: log lines that are not JSON are
// kept only in the tail shown on failure.
package procs

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Entry is one JSON log line.
type Entry struct {
	At         time.Time
	Msg        string
	Term       string // the "term" key: main, migration, unelected
	Controller string // the "controller" key
	Logger     string // the logger's name, e.g. "leader-migration"
}

// Line is one line of the process's stderr, JSON or not, with the time it
// was read.
type Line struct {
	At   time.Time
	Text string
}

// Process is one running program.
type Process struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd

	mu      sync.Mutex
	entries []Entry
	lines   []Line

	exited   chan struct{}
	err      error
	exitedAt time.Time

	allowed []KnownRace
}

// KnownRace is a data race in code this project does not own and cannot
// change, which a test accepts by its signature: a race detector report is
// this race when the first frame of each of its accesses is one of Frames
// (function names as the detector prints them, without the "()"). Every
// other report fails the test, whether the process exited or was killed.
type KnownRace struct {
	Why    string   // where it is reported upstream, and why it is harmless here
	Frames []string // e.g. "k8s.io/cloud-provider/controllers/service.(*serviceCache).allServices"
}

// AllowRace accepts the race detector's reports of k (see KnownRace). A
// clean exit that reports only allowed races (the detector's exit status
// 66) counts as clean; each allowed report is logged.
func (p *Process) AllowRace(k KnownRace) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allowed = append(p.allowed, k)
}

// Start runs binary with args. JSON log lines on its stderr are parsed
// into Entries; every line is kept for WaitLine.
func Start(t testing.TB, name, binary string, args ...string) *Process {
	return StartEnv(t, name, nil, binary, args...)
}

// StartEnv is Start with extra environment variables ("K=V"), added to
// the test's own.
func StartEnv(t testing.TB, name string, env []string, binary string, args ...string) *Process {
	t.Helper()
	p := &Process{t: t, name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
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
		p.exitedAt = time.Now()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		known, unknown := p.races()
		for _, r := range known {
			t.Logf("%s: an allowed race (%s):\n%s", p.name, r.why, r.text)
		}
		for _, r := range unknown {
			t.Errorf("%s: the race detector reported:\n%s", p.name, r.text)
		}
	})
	return p
}

// raceExit is the race detector's exit status after a report.
const raceExit = 66

type raceReport struct {
	text string
	why  string // the KnownRace's Why; empty when not allowed
}

// races returns the race detector's reports in the log, split into those
// AllowRace accepts and the rest.
func (p *Process) races() (known, unknown []raceReport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; i < len(p.lines); i++ {
		if !strings.Contains(p.lines[i].Text, "WARNING: DATA RACE") {
			continue
		}
		var text strings.Builder
		var tops []string
		for ; i < len(p.lines); i++ {
			l := p.lines[i].Text
			text.WriteString(l)
			text.WriteByte('\n')
			if strings.HasPrefix(l, "==================") {
				break
			}
			if isAccess(l) && i+1 < len(p.lines) {
				tops = append(tops, strings.TrimSuffix(strings.TrimSpace(p.lines[i+1].Text), "()"))
			}
		}
		r := raceReport{text: text.String()}
		for _, k := range p.allowed {
			if len(tops) > 0 && allIn(tops, k.Frames) {
				r.why = k.Why
				break
			}
		}
		if r.why != "" {
			known = append(known, r)
		} else {
			unknown = append(unknown, r)
		}
	}
	return known, unknown
}

// isAccess reports whether l heads one access of a race report ("Read at
// 0x… by goroutine 7:", "Previous write at …").
func isAccess(l string) bool {
	l = strings.TrimPrefix(l, "Previous ")
	l = strings.TrimPrefix(strings.ToLower(l), "atomic ")
	return (strings.HasPrefix(l, "read at ") || strings.HasPrefix(l, "write at ")) &&
		strings.HasSuffix(l, ":")
}

func allIn(xs, set []string) bool {
	for _, x := range xs {
		if !slices.Contains(set, x) {
			return false
		}
	}
	return true
}

// Name is the name given to Start.
func (p *Process) Name() string { return p.name }

func (p *Process) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var raw struct {
			TS         float64 `json:"ts"`
			Msg        string  `json:"msg"`
			Term       string  `json:"term"`
			Controller string  `json:"controller"`
			Logger     string  `json:"logger"`
		}
		p.mu.Lock()
		p.lines = append(p.lines, Line{At: time.Now(), Text: string(line)})
		if json.Unmarshal(line, &raw) == nil && raw.TS > 0 {
			p.entries = append(p.entries, Entry{At: time.UnixMilli(int64(raw.TS)), Msg: raw.Msg,
				Term: raw.Term, Controller: raw.Controller, Logger: raw.Logger})
		}
		p.mu.Unlock()
	}
}

// FirstLine returns the first line read at or after since that contains
// text, without waiting.
func (p *Process) FirstLine(text string, since time.Time) (Line, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if !l.At.Before(since) && strings.Contains(l.Text, text) {
			return l, true
		}
	}
	return Line{}, false
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Lines returns a copy of the lines read so far.
func (p *Process) Lines() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Line(nil), p.lines...)
}

// WaitLine waits for a line containing text, read at or after since.
func (p *Process) WaitLine(text string, since time.Time, timeout time.Duration) Line {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if l, ok := p.FirstLine(text, since); ok {
			return l
		}
		select {
		case <-p.exited:
			p.t.Fatalf("%s exited (%v) before printing %q; its last lines:\n%s",
				p.name, p.err, text, p.LastLines())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not print %q within %v; its last lines:\n%s",
				p.name, text, timeout, p.LastLines())
		}
	}
}

// onlyAllowedRaces reports whether the process's exit status is the race
// detector's and every report in its log is an allowed one.
func (p *Process) onlyAllowedRaces() bool {
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.ExitCode() != raceExit {
		return false
	}
	known, unknown := p.races()
	return len(known) > 0 && len(unknown) == 0
}

// Signal sends sig and waits up to timeout for the exit, whatever its
// status (a program that dies of SIGTERM, as upstream's does, included);
// it returns when the signal was sent.
func (p *Process) Signal(sig os.Signal, timeout time.Duration) time.Time {
	p.t.Helper()
	sent := p.Send(sig)
	p.WaitExit(timeout)
	return sent
}

// Send sends sig and returns when it was sent, without waiting.
func (p *Process) Send(sig os.Signal) time.Time {
	sent := time.Now()
	_ = p.cmd.Process.Signal(sig)
	return sent
}

// WaitExit waits up to timeout for the exit, whatever its status, and
// returns when the process was seen to exit.
func (p *Process) WaitExit(timeout time.Duration) time.Time {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.exitedAt
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %v; last log lines:\n%s", p.name, timeout, p.LastLines())
		return time.Time{}
	}
}

// Entries returns a copy of the entries read so far.
func (p *Process) Entries() []Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Entry(nil), p.entries...)
}

// Find returns the first entry with msg (and term, if not empty) at or
// after since.
func (p *Process) Find(msg, term string, since time.Time) (Entry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.entries {
		if e.Msg == msg && (term == "" || e.Term == term) && !e.At.Before(since) {
			return e, true
		}
	}
	return Entry{}, false
}

// WaitLog waits for Find to succeed, failing the test after timeout or if
// the process exits first.
func (p *Process) WaitLog(msg, term string, since time.Time, timeout time.Duration) Entry {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if e, ok := p.Find(msg, term, since); ok {
			return e
		}
		select {
		case <-p.exited:
			p.t.Fatalf("%s exited (%v) before logging %q; its last log lines:\n%s",
				p.name, p.err, msg, p.LastLines())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not log %q within %v; its last log lines:\n%s",
				p.name, msg, timeout, p.LastLines())
		}
	}
}

// LastLines returns the end of the process's log. When the log holds a
// race detector report or a panic, the report is returned first, whole (up
// to 32 KiB): the end of the log alone would lose the part naming the
// variable or the panic's value.
func (p *Process) LastLines() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for i, l := range p.lines {
		if !strings.Contains(l.Text, "WARNING: DATA RACE") && !strings.HasPrefix(l.Text, "panic: ") {
			continue
		}
		b.WriteString("(report)\n")
		for _, r := range p.lines[i:] {
			if b.Len() > 32<<10 {
				break
			}
			b.WriteString(r.Text)
			b.WriteByte('\n')
		}
		b.WriteString("(end of the log)\n")
		break
	}
	start, n := len(p.lines), 0
	for start > 0 && n+len(p.lines[start-1].Text) < 8<<10 {
		start--
		n += len(p.lines[start].Text) + 1
	}
	for _, l := range p.lines[start:] {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// Stop sends SIGTERM and waits for the exit, which must be clean; it
// returns when the signal was sent.
func (p *Process) Stop(timeout time.Duration) time.Time {
	p.t.Helper()
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.err != nil && !p.onlyAllowedRaces() {
			p.t.Errorf("%s: exit after SIGTERM: %v; last log lines:\n%s", p.name, p.err, p.LastLines())
		}
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %v of SIGTERM; last log lines:\n%s",
			p.name, timeout, p.LastLines())
	}
	return sent
}
