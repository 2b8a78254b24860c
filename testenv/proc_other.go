//go:build !unix

package testenv

import (
	"os/exec"
	"syscall"
)

// Without process groups, only the child itself can be stopped, and only by
// killing it.

func sysProcAttr() *syscall.SysProcAttr { return nil }

func terminateGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }

func killGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }
