//go:build conformance && unix

package cluster_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/test/cluster"
)

var managerFlag = flag.String("cluster.manager", string(cluster.Upstream),
	"the controller manager to run: upstream, native or dropin")

var dirFlag = flag.String("cluster.dir", "",
	"keep the cluster's logs here (default: a temporary directory)")

// TestClusterPlaysTheKubelet: a cluster of two kwok nodes under a
// controller manager runs a Deployment's pods (Running, Ready, with IPs of
// their nodes' pod CIDRs), completes a Job whose pods exit 0, fails one
// whose pods exit 1 (restartPolicy Never, backoffLimit 0), keeps a pod
// with an unpullable image in ImagePullBackOff, and removes deleted pods;
// then it stops cleanly.
func TestClusterPlaysTheKubelet(t *testing.T) {
	m := cluster.Manager(*managerFlag)
	binary := ""
	if m != cluster.Upstream {
		bins, err := cluster.BuildManagers(t.Context(), t.TempDir(), os.Stderr, m)
		if err != nil {
			t.Fatal(err)
		}
		binary = bins[m]
	}
	dir := *dirFlag
	if dir == "" {
		dir = t.TempDir()
	}
	c, err := cluster.Start(t.Context(), cluster.Options{Manager: m, ManagerBinary: binary,
		Nodes: 2, Dir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop()
		}
		if t.Failed() {
			for _, name := range []string{"kwok.log", "controller-manager-" + string(m) + ".log"} {
				data, _ := os.ReadFile(filepath.Join(dir, name))
				if len(data) > 8<<10 {
					data = data[len(data)-8<<10:]
				}
				t.Logf("last lines of %s:\n%s", name, data)
			}
		}
	})
	cs := kubernetes.NewForConfigOrDie(c.Config())
	ctx := t.Context()
	ns := "kubelet"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Within(time.Minute).UntilContext(t, "the namespace's default ServiceAccount",
		func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, err
		})

	pod := func(name, image string, command ...string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: image, Command: command}}},
		}
	}
	// Pods that run: a ReplicaSet of three.
	server := pod("server", "registry.k8s.io/e2e-test-images/agnhost:2.56")
	server.Spec.RestartPolicy = corev1.RestartPolicyAlways
	rs := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "server"},
		Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](3),
			Selector: server.Labels, Template: &server}}
	_, err = cs.CoreV1().ReplicationControllers(ns).Create(ctx, rs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll.Within(time.Minute).UntilContext(t, "three Running, Ready pods with IPs",
		func(ctx context.Context) (bool, error) {
			pods, err := cs.CoreV1().Pods(ns).List(ctx,
				metav1.ListOptions{LabelSelector: "app=server"})
			if err != nil {
				return false, err
			}
			ready := 0
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && isReady(&p) {
					ready++
				}
			}
			return ready == 3, fmt.Errorf("%d of %d ready", ready, len(pods.Items))
		})

	// A deleted pod is seen terminating (still Running, a deletion time
	// set) before it goes: kwok takes its grace period, at most 3 s.
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=server"})
	if err != nil {
		t.Fatal(err)
	}
	victim := pods.Items[0].Name
	if err := cs.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	p, err := cs.CoreV1().Pods(ns).Get(ctx, victim, metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("right after the delete: %v, %+v", err, p)
	}
	poll.Within(time.Minute).UntilContext(t, "the deleted pod gone",
		func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().Pods(ns).Get(ctx, victim, metav1.GetOptions{})
			return apierrors.IsNotFound(err), err
		})
	if took := time.Since(deleted); took < 2*time.Second {
		t.Errorf("the deleted pod was gone after %v, before its 3 s of termination", took)
	}

	// Jobs: one whose pods exit 0, one whose pods exit 1.
	for _, j := range []struct {
		name    string
		command []string
		want    batchv1.JobConditionType
	}{
		{"succeeds", []string{"/bin/sh", "-c", "exit 0"}, batchv1.JobComplete},
		{"fails", []string{"/bin/sh", "-c", "exit 1"}, batchv1.JobFailed},
	} {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: j.name},
			Spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2),
				BackoffLimit: ptr.To[int32](0), Template: pod(j.name, "busybox", j.command...)}}
		if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Within(time.Minute).UntilContext(t, "Job "+j.name+" "+string(j.want),
			func(ctx context.Context) (bool, error) {
				got, err := cs.BatchV1().Jobs(ns).Get(ctx, j.name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				for _, c := range got.Status.Conditions {
					if c.Type == j.want && c.Status == corev1.ConditionTrue {
						return true, nil
					}
				}
				return false, fmt.Errorf("conditions %v", got.Status.Conditions)
			})
	}

	// An unpullable image.
	bad := pod("bad", "registry.k8s.io/pause:404")
	badPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: bad.Spec}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, badPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Within(time.Minute).UntilContext(t, "the pod in ImagePullBackOff",
		func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, "bad", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, s := range p.Status.ContainerStatuses {
				if s.State.Waiting != nil && s.State.Waiting.Reason == "ImagePullBackOff" {
					return p.Status.Phase == corev1.PodPending, nil
				}
			}
			return false, fmt.Errorf("phase %s, statuses %v", p.Status.Phase,
				p.Status.ContainerStatuses)
		})

	// Deleted pods go: the namespace empties and is removed.
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Within(2*time.Minute).UntilContext(t, "the namespace gone",
		func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			pods, _ := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil && pods != nil {
				err = fmt.Errorf("%d pods left", len(pods.Items))
			}
			return false, err
		})
	if err := c.Alive(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver.log")); err != nil {
		t.Error(errors.Join(errors.New("the API server's log was not kept"), err))
	}
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
