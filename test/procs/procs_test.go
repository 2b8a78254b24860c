package procs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// report is a race detector report in the detector's layout, with the
// given first frames of its two accesses.
func report(current, previous string) string {
	return fmt.Sprintf(`==================
WARNING: DATA RACE
Read at 0x00c0000060f0 by goroutine 65:
  %s()
      /src/a.go:503 +0x27e
  example.com/a.caller()
      /src/a.go:724 +0x18e

Previous write at 0x00c0000060f0 by goroutine 61:
  %s()
      /src/b.go:339 +0x1a8

Goroutine 65 (running) created at:
  example.com/a.Run()
      /src/a.go:250 +0xaaa
==================
`, current, previous)
}

var serviceRace = KnownRace{
	Why:    "upstream's",
	Frames: []string{"example.com/svc.(*cache).all", "example.com/svc.(*C).process"},
}

// recorder is a testing.TB whose failures and cleanups are recorded
// instead of acted on.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.TB.FailNow()
}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Cleanup(f func())    { r.cleanups = append(r.cleanups, f) }
func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// childExitingAs starts a shell that writes log to stderr, then waits for
// SIGTERM and exits with status code, as a race-enabled binary exits with
// 66 after a report.
func childExitingAs(t *testing.T, rec *recorder, log string, code int) *Process {
	t.Helper()
	dir := t.TempDir()
	logFile := filepath.Join(dir, "log")
	if err := os.WriteFile(logFile, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`trap 'exit %d' TERM; cat %q >&2; echo ready >&2; while :; do sleep 0.01; done`, code, logFile)
	p := Start(rec, "child", "/bin/sh", "-c", script)
	p.WaitLine("ready", time.Time{}, 10*time.Second)
	return p
}

func TestStopAcceptsOnlyAllowedRaces(t *testing.T) {
	for _, tc := range []struct {
		name       string
		log        string
		code       int
		allow      bool
		wantErrors int
	}{
		{"clean exit, no report", "{}\n", 0, false, 0},
		{"allowed race, exit 66", report("example.com/svc.(*cache).all", "example.com/svc.(*C).process"), 66, true, 0},
		{"same race, not allowed", report("example.com/svc.(*cache).all", "example.com/svc.(*C).process"), 66, false, 2},
		{"one side is ours", report("example.com/svc.(*cache).all", "example.com/ours.write"), 66, true, 2},
		{"allowed race, but another failure status", report("example.com/svc.(*cache).all", "example.com/svc.(*C).process"), 3, true, 1},
		{"no report, exit 66", "{}\n", 66, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			p := childExitingAs(t, rec, tc.log, tc.code)
			if tc.allow {
				p.AllowRace(serviceRace)
			}
			p.Stop(10 * time.Second)
			rec.runCleanups()
			if len(rec.errors) != tc.wantErrors {
				t.Fatalf("got %d failures, want %d:\n%s", len(rec.errors), tc.wantErrors, strings.Join(rec.errors, "\n"))
			}
		})
	}
}

func TestKilledProcessStillFailsOnItsRaces(t *testing.T) {
	rec := &recorder{TB: t}
	childExitingAs(t, rec, report("example.com/a.f", "example.com/a.g"), 66)
	rec.runCleanups() // kills it
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "WARNING: DATA RACE") {
		t.Fatalf("want one failure quoting the report, got %q", rec.errors)
	}
}

func TestLastLinesLeadsWithTheReport(t *testing.T) {
	rec := &recorder{TB: t}
	var tail strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&tail, `{"msg":"line %d"}`+"\n", i)
	}
	p := childExitingAs(t, rec, report("example.com/a.f", "example.com/a.g")+tail.String(), 66)
	got := p.LastLines()
	if !strings.Contains(got, "example.com/a.f()") || !strings.Contains(got, `"line 1999"`) {
		t.Fatalf("LastLines lost the report or the end of the log:\n%s", got)
	}
	p.Signal(os.Kill, 10*time.Second)
	rec.errors = nil
	rec.runCleanups()
}
