package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

const (
	// stopGrace is how long a process gets to exit after SIGTERM before it
	// is killed.
	stopGrace = 5 * time.Second
	// killWait bounds the wait for a killed process to be reaped.
	killWait = 10 * time.Second

	// errorTailBytes is how much of a log an error message quotes.
	errorTailBytes = 8 << 10
	// logTailBytes is how much of a log APIServerLog returns.
	logTailBytes = 64 << 10
)

// errPortInUse marks a process that exited because one of its ports had been
// taken between picking it and binding it.
var errPortInUse = errors.New("port already in use")

// process is one child process, in its own process group, with its output in
// a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	cancel  context.CancelFunc // asks the process to terminate (SIGTERM to its group)

	done    chan struct{} // closed once the process has exited and been reaped
	exitErr error         // Wait's result; read only after done is closed
}

// startProcess starts path with args, its stdout and stderr going to a new
// log file at logPath. The process lives until stop is called (or it exits):
// it is not tied to any caller's context.
func startProcess(name, path string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("testenv: %s log: %w", name, err)
	}
	// The child gets its own copy of the descriptor; ours is not needed
	// once it has started (or failed to).
	defer logFile.Close()

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return terminateGroup(cmd) }
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("testenv: starting %s (%s): %w", name, path, err)
	}
	p := &process{
		name:    name,
		logPath: logPath,
		cmd:     cmd,
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended, without blocking.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// earlyExitError describes a process that ended before it was asked to,
// quoting its log. It wraps errPortInUse when the log says a port was taken.
// Call only after done is closed.
func (p *process) earlyExitError() error {
	tail := tailFile(p.logPath, errorTailBytes)
	err := fmt.Errorf("testenv: %s (pid %d) exited early: %v; last lines of %s:\n%s",
		p.name, p.pid(), p.exitErr, p.logPath, tail)
	if strings.Contains(tail, "address already in use") {
		return fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return err
}

// stop terminates the process group: SIGTERM, then SIGKILL after stopGrace,
// and waits until the process has been reaped. It reports whether it had to
// kill. Stopping a process that already exited only collects it.
func (p *process) stop() (killed bool, err error) {
	p.cancel() // exec calls cmd.Cancel unless the process was already reaped
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-p.done:
		return false, nil
	case <-grace.C:
	}
	if err := killGroup(p.cmd); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return true, fmt.Errorf("testenv: killing %s (pid %d): %w", p.name, p.pid(), err)
	}
	reap := time.NewTimer(killWait)
	defer reap.Stop()
	select {
	case <-p.done:
		return true, nil
	case <-reap.C:
		return true, fmt.Errorf("testenv: %s (pid %d) still running %v after SIGKILL",
			p.name, p.pid(), killWait)
	}
}

// tailFile returns up to the last n bytes of the file at path, starting at a
// line boundary when it had to cut.
func tailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	start := max(fi.Size()-n, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, start, fi.Size()-start))
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	s := string(b)
	if start > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		s = "...\n" + s
	}
	if s == "" {
		return "(log empty)"
	}
	return s
}
