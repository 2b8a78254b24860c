//go:build unix

package testenv

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// signalGroup sends sig to the process group the child leads.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	err := syscall.Kill(-cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}
