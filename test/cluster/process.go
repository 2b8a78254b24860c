//go:build unix

package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

const (
	// stopGrace is how long a component gets to exit after SIGTERM before
	// its process group is killed.
	stopGrace = 10 * time.Second
	// reapWait bounds the wait for a killed process to be reaped.
	reapWait = 10 * time.Second
	// tailBytes is how much of a log an error quotes.
	tailBytes = 6 << 10
)

// process is one component: a child process in a process group of its
// own, its stdout and stderr in a log file.
type process struct {
	name, logPath string
	cmd           *exec.Cmd
	done          chan struct{} // closed once the process has been reaped
	err           error         // Wait's result; read after done is closed
	stopping      chan struct{} // closed when stop begins
}

// startProcess runs path with args and env (added to this process's
// environment), logging to logPath.
func startProcess(name, path string, args, env []string, logPath string) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: %s log: %w", name, err)
	}
	defer log.Close() // the child has its own descriptor
	fmt.Fprintf(log, "### %s: %s %q\n", time.Now().Format(time.RFC3339Nano), path, args)
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cluster: starting %s (%s): %w", name, path, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{}),
		stopping: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, without blocking.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// failed reports whether the process has ended on its own: not stopped
// or killed by stop or kill.
func (p *process) failed() bool {
	select {
	case <-p.stopping:
		return false
	default:
		return p.exited()
	}
}

// exitError describes a process that ended on its own, quoting its log.
// Call only once exited is true.
func (p *process) exitError() error {
	return fmt.Errorf("cluster: %s (pid %d) exited: %v; last lines of %s:\n%s",
		p.name, p.cmd.Process.Pid, p.err, p.logPath, tail(p.logPath, tailBytes))
}

// stop sends SIGTERM to the process group, SIGKILL after stopGrace, and
// waits for the process to be reaped (at most reapWait after the kill). A
// process that had exited already is only collected. It returns an error
// when the process did not end, and says so when it had to be killed.
func (p *process) stop() (killed bool, err error) {
	select {
	case <-p.stopping:
	default:
		close(p.stopping)
	}
	if p.exited() {
		return false, nil
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-p.done:
		// Children it left in its group go too.
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		return false, nil
	case <-grace.C:
	}
	if err := syscall.Kill(pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return true, fmt.Errorf("cluster: killing %s: %w", p.name, err)
	}
	reap := time.NewTimer(reapWait)
	defer reap.Stop()
	select {
	case <-p.done:
		return true, nil
	case <-reap.C:
		return true, fmt.Errorf("cluster: %s (pid %d) was not reaped %v after SIGKILL",
			p.name, p.cmd.Process.Pid, reapWait)
	}
}

// kill kills the process group at once (SIGKILL) and waits for the
// process to be reaped, at most reapWait; the process counts as stopped.
func (p *process) kill() error {
	select {
	case <-p.stopping:
	default:
		close(p.stopping)
	}
	if p.exited() {
		return nil
	}
	err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("cluster: killing %s: %w", p.name, err)
	}
	reap := time.NewTimer(reapWait)
	defer reap.Stop()
	select {
	case <-p.done:
		return nil
	case <-reap.C:
		return fmt.Errorf("cluster: %s (pid %d) was not reaped %v after SIGKILL",
			p.name, p.cmd.Process.Pid, reapWait)
	}
}

// watch returns a context that is cancelled with p's exit error if p exits
// before stop is called, or when parent ends; cancel releases it.
func (p *process) watch(parent context.Context) (ctx context.Context, cancel func()) {
	ctx, cancelCause := context.WithCancelCause(parent)
	go func() {
		select {
		case <-p.done:
			select {
			case <-p.stopping:
			default:
				cancelCause(p.exitError())
			}
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancelCause(context.Canceled) }
}

// tail returns up to n bytes of the end of the file at path, or a note on
// why it could not be read.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		if _, err := f.Seek(fi.Size()-n, io.SeekStart); err != nil {
			return "(" + err.Error() + ")"
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return string(b)
}
