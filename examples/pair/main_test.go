package main

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCommandLine: one command line carries the process's flags once and
// each Manager's under its prefix; a bad value of either Manager's names
// its own flag.
func TestCommandLine(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help lists both", []string{"--help"}, 0, "--janitor-controllers"},
		{"process flags are not copied", []string{"--janitor-kubeconfig=/x"}, 2,
			"unknown flag: --janitor-kubeconfig"},
		{"the janitor's own bad value", []string{"--janitor-controller-shutdown-timeout=0"}, 2,
			"--janitor-controller-shutdown-timeout"},
		{"both built against one kubeconfig", []string{"--kubeconfig=/nonexistent"}, 1,
			`--kubeconfig "/nonexistent"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			code := run(context.Background(), tt.args, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("run(%v) = %d, stderr:\n%s\nwant %d and %q", tt.args, code,
					stderr.String(), tt.code, tt.want)
			}
		})
	}
}
