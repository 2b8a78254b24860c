//go:build unix && !linux

package cluster

import "syscall"

// sysProcAttr puts a component in a process group of its own, so that stop
// reaches whatever it starts.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
