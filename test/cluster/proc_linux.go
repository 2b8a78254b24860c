package cluster

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sysProcAttr puts a component in a process group of its own, so that stop
// reaches whatever it starts, and has the kernel kill it if this process
// dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// userHZ is the unit of the times in /proc/<pid>/stat: USER_HZ, which
// Linux fixes at 100 for user space whatever the kernel's own tick.
const userHZ = 100

// processUsage reads pid's CPU time (user and system, every thread) from
// /proc/<pid>/stat and its peak resident set (VmHWM) from
// /proc/<pid>/status.
func processUsage(pid int) (Usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("cluster: usage of pid %d: %w", pid, err)
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// fields are counted after its closing one, from field 3 (state).
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return Usage{}, fmt.Errorf("cluster: usage of pid %d: /proc/%d/stat unreadable", pid, pid)
	}
	fields := strings.Fields(string(stat[end+1:]))
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return Usage{}, fmt.Errorf("cluster: usage of pid %d: /proc/%d/stat too short", pid, pid)
	}
	var ticks int64
	for _, f := range []string{fields[utime], fields[stime]} {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return Usage{}, fmt.Errorf("cluster: usage of pid %d: %w", pid, err)
		}
		ticks += n
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("cluster: usage of pid %d: %w", pid, err)
	}
	u := Usage{CPU: time.Duration(ticks) * time.Second / userHZ}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return Usage{}, fmt.Errorf("cluster: usage of pid %d: VmHWM: %w", pid, err)
			}
			u.PeakRSS = kb << 10
			return u, nil
		}
	}
	return Usage{}, fmt.Errorf("cluster: usage of pid %d: no VmHWM in /proc/%d/status", pid, pid)
}
