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
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
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
	tail    bytes.Buffer // the last lines, for failures

	exited chan struct{}
	err    error
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
			p.entries = append(p.entries, Entry{At: time.UnixMilli(int64(raw.TS)), Msg: raw.Msg, Term: raw.Term, Controller: raw.Controller, Logger: raw.Logger})
		}
		if p.tail.Len() > 64<<10 {
			p.tail.Reset()
		}
		p.tail.Write(line)
		p.tail.WriteByte('\n')
		p.mu.Unlock()
	}
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
		p.mu.Lock()
		for _, l := range p.lines {
			if !l.At.Before(since) && strings.Contains(l.Text, text) {
				p.mu.Unlock()
				return l
			}
		}
		p.mu.Unlock()
		select {
		case <-p.exited:
			p.t.Fatalf("%s exited (%v) before printing %q; its last lines:\n%s", p.name, p.err, text, p.LastLines())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not print %q within %v; its last lines:\n%s", p.name, text, timeout, p.LastLines())
		}
	}
}

// Signal sends sig and waits up to timeout for the exit, whatever its
// status (a program that dies of SIGTERM, as upstream's does, included);
// it returns when the signal was sent.
func (p *Process) Signal(sig os.Signal, timeout time.Duration) time.Time {
	p.t.Helper()
	sent := time.Now()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %v of %v; last log lines:\n%s", p.name, timeout, sig, p.LastLines())
	}
	return sent
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
			p.t.Fatalf("%s exited (%v) before logging %q; its last log lines:\n%s", p.name, p.err, msg, p.LastLines())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not log %q within %v; its last log lines:\n%s", p.name, msg, timeout, p.LastLines())
		}
	}
}

// LastLines returns the end of the process's log.
func (p *Process) LastLines() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.tail.Bytes()
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
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
		if p.err != nil {
			p.t.Errorf("%s: exit after SIGTERM: %v; last log lines:\n%s", p.name, p.err, p.LastLines())
		}
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %v of SIGTERM; last log lines:\n%s", p.name, timeout, p.LastLines())
	}
	return sent
}
