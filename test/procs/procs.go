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
	"os/exec"
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

// Process is one running program.
type Process struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd

	mu      sync.Mutex
	entries []Entry
	tail    bytes.Buffer // the last lines, for failures

	exited chan struct{}
	err    error
}

// Start runs binary with args; its stderr must carry JSON log lines.
func Start(t testing.TB, name, binary string, args ...string) *Process {
	t.Helper()
	p := &Process{t: t, name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
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
