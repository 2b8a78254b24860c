package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
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
		{"help in sections", []string{"--help"}, 0,
			"\nLeader election flags:\n\n      --leader-elect "},
		{"the janitor's sections say so", []string{"--help"}, 0,
			"\nLeader election (--janitor-*) flags:\n\n      --janitor-leader-elect "},
		{"the janitor's help names its flags", []string{"--help"}, 0,
			"headers specified by --janitor-requestheader-username-headers"},
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

// TestJanitorsBuildErrorNamesItsFlags: when the second Manager's Build
// fails, its error names the flags as they were typed, with the janitor's
// prefix, not the first Manager's unprefixed ones.
func TestJanitorsBuildErrorNamesItsFlags(t *testing.T) {
	// A kubeconfig that loads: Build makes no API call.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	args := []string{"--kubeconfig=" + kubeconfig, "--secure-port=0",
		"--janitor-controller-start-interval=-1s", "--janitor-leader-elect-renew-deadline=20s"}
	code := run(context.Background(), args, &stderr)
	out := stderr.String()
	if code != 1 || !strings.Contains(out, `manager "pod-janitor": invalid configuration`) {
		t.Fatalf("run(%v) = %d, stderr:\n%s\nwant 1 and the janitor's Build error", args, code, out)
	}
	for _, want := range []string{"--janitor-controller-start-interval: must not be negative",
		"RenewDeadline (--janitor-leader-elect-renew-deadline)"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	kcmFlag := regexp.MustCompile(
		`(^|[^a-z-])--(controller-start-interval|leader-elect-renew-deadline)`)
	if kcmFlag.MatchString(out) {
		t.Errorf("the janitor's error names the other Manager's flag:\n%s", out)
	}
}
