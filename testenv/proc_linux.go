package testenv

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts the child in a process group of its own, so that signals
// reach anything it starts, and has the kernel kill it if the test process
// dies without calling Stop.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func terminateGroup(cmd *exec.Cmd) error { return signalGroup(cmd, syscall.SIGTERM) }

func killGroup(cmd *exec.Cmd) error { return signalGroup(cmd, syscall.SIGKILL) }
