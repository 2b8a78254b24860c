package cluster

import "syscall"

// sysProcAttr puts a component in a process group of its own, so that stop
// reaches whatever it starts, and has the kernel kill it if this process
// dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
