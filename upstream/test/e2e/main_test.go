//go:build integration

// Package e2e drives the drop-in kube-controller-manager
// (upstream/cmd/kube-controller-manager) end to end: one process, started
// with a kubeadm-like command line against a real etcd and kube-apiserver
// from package testenv, serves every scenario of the package; each scenario
// works in namespaces of its own and asserts the end state upstream's
// controllers produce. There is no kubelet and no scheduler: where KCM
// waits for them, the test plays their part by writing pod status.
//
// Guarantees: the process is started once, by the first test that needs it,
// and stopped by TestMain with SIGTERM, which must make it exit 0 within
// stopTimeout, releasing its lease; every wait has a deadline.
// Non-guarantees: the health port is picked free just before the process
// binds it, so another process could take it in between; cluster-scoped
// objects (nodes, CSRs, kube-public's cluster-info) are not cleaned up —
// the Env is thrown away at the end.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/testenv"
)

// shared is the package's one Env; started by the first test that asks,
// stopped by TestMain after the drop-in.
var shared testenv.Shared

func sharedEnv(t testing.TB) *testenv.Env {
	t.Helper()
	return shared.Get(t)
}

func TestMain(m *testing.M) {
	// Upstream packages start goroutines at import time; they are not ours.
	ignore := goleak.IgnoreCurrent()
	expected.names, expected.err = startedControllers()
	code := m.Run()
	if err := stopKCM(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		code = 1
	}
	if code != 0 {
		dropIn.dumpLog(os.Stderr)
	}
	dropIn.removeDir()
	if err := shared.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the test environment: %v\n", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(ignore); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines leaked: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// setup returns the admin clientset of the shared Env once the drop-in
// leads, and a fresh namespace whose default ServiceAccount and
// kube-root-ca.crt ConfigMap (both KCM's work) exist.
func setup(t *testing.T) (kubernetes.Interface, string) {
	t.Helper()
	cs := startKCM(t)
	ns := namespace(t, cs)
	timed(t)
	return cs, ns
}

// timed logs how long the rest of the test takes, which excludes the
// shared start and the namespace's setup.
func timed(t *testing.T) {
	begin := time.Now()
	t.Cleanup(func() { t.Logf("scenario took %v", time.Since(begin).Round(time.Millisecond)) })
}

func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", " ", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: strings.TrimRight(name, "-") + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "namespace "+ns.Name+" to get its default ServiceAccount and root CA", func(ctx context.Context) error {
		if _, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := cs.CoreV1().ConfigMaps(ns.Name).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
	return ns.Name
}

// Poll intervals and deadlines: for one expected state, and for one call
// of its condition (which may overrun the former, so that the error
// reported is the condition's own and not the deadline's).
const (
	pollInterval   = 100 * time.Millisecond
	waitTimeout    = 60 * time.Second
	attemptTimeout = 10 * time.Second
)

// eventually calls cond every pollInterval until it returns nil, failing t
// with cond's last error once timeout passes, or at once if the drop-in
// exits.
func eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
		err := cond(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-dropIn.exited:
			t.Fatalf("waiting for %s: kube-controller-manager exited: %v", what, dropIn.exitErr)
		case <-deadline.C:
			t.Fatalf("waiting %v for %s: %v", timeout, what, err)
		case <-tick.C:
		}
	}
}

// gone is cond's error until get reports NotFound.
func gone(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	default:
		return errors.New("still exists")
	}
}

// isGoneOrConflict: a write lost to a newer version or a deletion, which
// the next poll sees.
func isGoneOrConflict(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsConflict(err)
}
