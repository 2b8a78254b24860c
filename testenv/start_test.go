//go:build linux

package testenv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	testpoll "github.com/ctrlhost/ctrlhost/internal/poll"
)

func TestOptionsValidate(t *testing.T) {
	opts := Options{
		Authorization: "Webhook",
		StartTimeout:  -time.Second,
		Users: []User{
			{Name: ""},
			{Name: AdminUser},
			{Name: "alice", Groups: []string{"a,b"}},
			{Name: "alice"},
		},
	}.withDefaults()
	err := opts.validate()
	if err == nil {
		t.Fatal("validate succeeded, want errors")
	}
	for _, want := range []string{
		`Authorization must be "RBAC" or "AlwaysAllow", got "Webhook"`,
		"StartTimeout must not be negative",
		"Users[0].Name must not be empty",
		`Users[1].Name "testenv-admin" is reserved`,
		`Users[2].Groups[0] "a,b"`,
		`Users[3].Name "alice" is a duplicate`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}

	def := Options{}.withDefaults()
	if def.Authorization != AuthorizationRBAC || def.StartTimeout != defaultStartTimeout || def.Logf == nil {
		t.Errorf("defaults = %+v", def)
	}
	if err := def.validate(); err != nil {
		t.Errorf("validate(defaults): %v", err)
	}
}

// startFakes runs Start with a fake kube-apiserver and the given etcd script
// in an isolated TMPDIR, and checks that nothing is left there afterwards.
func startFakes(t *testing.T, etcdScript string, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	clearBinEnv(t)
	bin := t.TempDir()
	writeBin(t, bin, apiserverBinary, fakeAPIServer(KubernetesVersion))
	writeBin(t, bin, etcdBinary, etcdScript)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	begin := time.Now()
	env, err := Start(context.Background(), Options{BinDir: bin, StartTimeout: timeout, Logf: t.Logf})
	took := time.Since(begin)
	if err == nil {
		_ = env.Stop()
		t.Fatal("Start succeeded with a fake etcd")
	}
	left, rerr := os.ReadDir(tmp)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if len(left) != 0 {
		t.Errorf("Start left %v in TMPDIR after failing", left)
	}
	return took, err
}

func TestStartFailsAtOnceWhenEtcdExits(t *testing.T) {
	took, err := startFakes(t, "#!/bin/sh\necho 'fake etcd: disk on fire' >&2\nexit 3\n", 30*time.Second)
	for _, want := range []string{"etcd", "exited early", "exit status 3", "fake etcd: disk on fire"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if took > 10*time.Second {
		t.Errorf("Start took %v to notice etcd exiting; want it at once", took)
	}
}

func TestStartRetriesOnPortInUse(t *testing.T) {
	count := filepath.Join(t.TempDir(), "attempts")
	script := "#!/bin/sh\necho x >> " + count + "\n" +
		"echo '{\"level\":\"fatal\",\"error\":\"listen tcp 127.0.0.1:1: bind: address already in use\"}' >&2\nexit 1\n"
	_, err := startFakes(t, script, 30*time.Second)
	if !errors.Is(err, errPortInUse) {
		t.Errorf("error does not wrap errPortInUse: %v", err)
	}
	if want := "lost a port to another process " + strconv.Itoa(maxPortAttempts) + " times"; !strings.Contains(err.Error(), want) {
		t.Errorf("error does not mention %q:\n%v", want, err)
	}
	data, rerr := os.ReadFile(count)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if got := strings.Count(string(data), "x"); got != maxPortAttempts {
		t.Errorf("etcd started %d times, want %d", got, maxPortAttempts)
	}
}

func TestStartTimeoutStopsProcessGroup(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	// A child in the background, then the script itself becomes a sleep:
	// both are in etcd's process group and never become healthy.
	script := "#!/bin/sh\necho 'fake etcd starting'\nsleep 600 &\necho $! > " + pids + "\necho $$ >> " + pids + "\nexec sleep 600\n"
	took, err := startFakes(t, script, 2*time.Second)
	for _, want := range []string{"etcd", "not ready", "context deadline exceeded", "fake etcd starting"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if took > 15*time.Second {
		t.Errorf("Start took %v with a 2s StartTimeout", took)
	}
	data, rerr := os.ReadFile(pids)
	if rerr != nil {
		t.Fatal(rerr)
	}
	for f := range strings.FieldsSeq(string(data)) {
		pid, perr := strconv.Atoi(f)
		if perr != nil {
			t.Fatal(perr)
		}
		waitGone(t, pid)
	}
}

func TestStartHonoursContext(t *testing.T) {
	clearBinEnv(t)
	bin := t.TempDir()
	writeBin(t, bin, apiserverBinary, fakeAPIServer(KubernetesVersion))
	writeBin(t, bin, etcdBinary, "#!/bin/sh\nexec sleep 600\n")
	t.Setenv("TMPDIR", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Start(ctx, Options{BinDir: bin}); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("Start with a cancelled context: %v, want context canceled", err)
	}
}

// waitGone fails the test unless pid is gone (or a zombie) within a few
// seconds: a child reparented to init may take a moment to be reaped.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	if !testpoll.For(5*time.Second, func() bool { return !processAlive(pid) }) {
		t.Errorf("process %d still running", pid)
	}
}

// processAlive reports whether pid names a process that has not yet exited.
func processAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func TestFeatureGatesFlag(t *testing.T) {
	for _, tc := range []struct {
		gates map[string]bool
		want  string
	}{
		{nil, ""},
		{map[string]bool{"ShardedListAndWatch": true}, "--feature-gates=ShardedListAndWatch=true"},
		{map[string]bool{"ZGate": false, "AGate": true}, "--feature-gates=AGate=true,ZGate=false"},
	} {
		if got := (Options{FeatureGates: tc.gates}).withDefaults().featureGatesFlag(); got != tc.want {
			t.Errorf("FeatureGates %v: flag %q, want %q", tc.gates, got, tc.want)
		}
	}
}
