//go:build unix && !linux

package cluster

import (
	"fmt"
	"syscall"
)

// sysProcAttr puts a component in a process group of its own, so that stop
// reaches whatever it starts.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// processUsage is read from /proc, which only Linux has.
func processUsage(pid int) (Usage, error) {
	return Usage{}, fmt.Errorf("cluster: the usage of pid %d is read on Linux only", pid)
}
