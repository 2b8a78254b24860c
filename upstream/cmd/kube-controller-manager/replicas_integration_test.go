//go:build integration

package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/test/gobuild"
	"github.com/ctrlhost/ctrlhost/test/procs"
)

var dropIn = gobuild.New("github.com/ctrlhost/ctrlhost/upstream/cmd/kube-controller-manager").RaceLikeTest()

// startProcess runs the drop-in with args plus JSON logging.
func startProcess(t testing.TB, name string, args ...string) *procs.Process {
	t.Helper()
	return procs.Start(t, name, dropIn.Path(t), append(args, "--logging-format=json", "--v=2")...)
}

// probe creates a one-replica ReplicaSet and waits until a controller made
// its pod: proof that some replica acts, not only that it holds the lease.
func probe(t testing.TB, cs kubernetes.Interface, ns, name string, timeout time.Duration) {
	t.Helper()
	labels := map[string]string{"probe": name}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if _, err := cs.AppsV1().ReplicaSets(ns).Create(context.Background(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "probe=" + name})
		if err == nil && len(pods.Items) == 1 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("probe %s: no pod within %v (last list: %v)", name, timeout, err)
		}
	}
}

// TestTwoReplicasHandOff: two drop-in replicas under leader election on
// KCM's default durations; SIGTERM on the leader hands its lease over at
// once (well before the 15 s it would take to expire), the new leader acts
// on a probe object, and the two never run controllers at the same time.
func TestTwoReplicasHandOff(t *testing.T) {
	env := sharedEnv(t)
	cs := kubernetes.NewForConfigOrDie(env.Config())
	ns := namespace(t, cs)
	lease := "it-dropin-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	args := append(commandLine(t, env),
		"--leader-elect-resource-name="+lease, // its own lock in the shared API server
		"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s",
	)

	start := time.Now()
	a := startProcess(t, "replica-a", args...)
	aUp := a.WaitLog("Starting controllers", "main", start, 3*time.Minute)
	probe(t, cs, ns, "before", time.Minute)
	b := startProcess(t, "replica-b", args...)
	b.WaitLog("Campaigning for the lease", "", start, 3*time.Minute)

	sent := a.Stop(time.Minute)
	aDown := a.WaitLog("All controllers stopped", "main", aUp.At, time.Second)
	bUp := b.WaitLog("Starting controllers", "main", start, time.Minute)
	if handoff := bUp.At.Sub(sent); handoff >= 15*time.Second {
		t.Errorf("replica-b started %v after the SIGTERM: the lease was not released, it expired", handoff)
	} else {
		t.Logf("handoff: SIGTERM → replica-b starting controllers in %v", handoff)
	}
	if bUp.At.Before(aDown.At) {
		t.Errorf("overlap: replica-b started controllers at %v, before replica-a stopped its own at %v",
			bUp.At.Format(time.StampMicro), aDown.At.Format(time.StampMicro))
	}
	probe(t, cs, ns, "after", time.Minute)
	b.Stop(time.Minute)
}
