//go:build integration

package integration

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/internal/poll"
)

// TestKCMBinary drives the built-in controllers through examples/kcm, a
// separate process started with an upstream-style KCM command line, and
// runs the same scenarios as the in-process tests against it. Against a
// kube-apiserver older than its controllers (make matrix), it checks that
// the binary refuses it at start.
func TestKCMBinary(t *testing.T) {
	env := sharedEnv(t)
	cs := clientset(t, env.Config())
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(env.Dir(), "ca.crt")
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kube-controller-manager")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/kcm").CombinedOutput(); err != nil {
		t.Fatalf("go build examples/kcm: %v\n%s", err, out)
	}
	lease := "it-kcm-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cmd := exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		// Without the garbage collector: the TTL subtest checks that a
		// Job is deleted with Foreground propagation, which shows only
		// while no collector finishes the deletion (the collector has its
		// own differential scenarios).
		"--controllers=*,tokencleaner,-garbagecollector",
		"--leader-elect=true",
		"--leader-elect-lease-duration=15s",
		"--leader-elect-renew-deadline=10s",
		"--leader-elect-retry-period=2s",
		"--leader-elect-resource-lock=leases",
		"--leader-elect-resource-name="+lease, // its own lock in the shared API server
		"--leader-elect-resource-namespace=kube-system",
		"--root-ca-file="+caFile,
		"--secure-port=0",
		"--concurrent-replicaset-syncs=5",
		"--concurrent-rc-syncs=5",
		"--concurrent-ttl-after-finished-syncs=5",
		"--terminated-pod-gc-threshold=12500",
		"--kube-api-qps=100",
		"--kube-api-burst=200",
		"--min-resync-period=12h",
		"--v=2",
	)
	var stderr strings.Builder // written by exec's copying goroutine, read after Wait
	cmd.Stderr = io.MultiWriter(&prefixLog{tb: t, prefix: "kcm"}, &stderr)
	if serverMinor(t) < 37 {
		// Outside KCM 1.37's skew (make matrix on an older minor): the
		// binary refuses the server at start, saying why.
		err := cmd.Run()
		const want = "is older than these controllers (kube-controller-manager 1.37)"
		if err == nil || !strings.Contains(stderr.String(), want) {
			t.Fatalf("against kube-apiserver %s: %v, want exit status 1 and %q", serverVersion(),
				err, want)
		}
		return
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	poll.UntilContext(t, "the binary to take its lease", func(ctx context.Context) (bool, error) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("kube-controller-manager exited: %v", err)
		default:
		}
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})

	for _, r := range replicatedKinds {
		t.Run(r.kind, func(t *testing.T) { testReplicated(t, cs, r) })
	}
	ns := namespace(t, cs)
	t.Run("default service account", func(t *testing.T) { testDefaultServiceAccount(t, cs, ns) })
	t.Run("root CA config map", func(t *testing.T) { testRootCA(t, cs, ns, ca) })
	t.Run("finished job deleted after its TTL", func(t *testing.T) { testFinishedJob(t, cs, ns) })

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("kube-controller-manager after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("kube-controller-manager did not exit within 30s of SIGTERM")
	}
	l, err := cs.CoordinationV1().Leases("kube-system").Get(t.Context(), lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		t.Errorf("lease still held by %q after a graceful stop; it should be released", *l.Spec.HolderIdentity)
	}
}
