//go:build integration

package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/podgc"
	"github.com/ctrlhost/ctrlhost/controllers/rootcacertpublisher"
	"github.com/ctrlhost/ctrlhost/controllers/serviceaccount"
	"github.com/ctrlhost/ctrlhost/controllers/tokencleaner"
	"github.com/ctrlhost/ctrlhost/controllers/ttlafterfinished"
	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
)

// builtinTimeout bounds each wait for a built-in controller to act: it is
// the timeout of poll.UntilContext.
const builtinTimeout = poll.Timeout

// TestBuiltinControllers runs the five built-in controllers in one Manager
// against kube-apiserver and checks that each one acts on real objects.
func TestBuiltinControllers(t *testing.T) {
	env := sharedEnv(t)
	cs := clientset(t, env.Config())
	caFile := filepath.Join(env.Dir(), "ca.crt")
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}

	gc := podgc.NewOptions()
	gc.GCCheckPeriod = 200 * time.Millisecond
	gc.QuarantineTime = time.Second
	rc := rootcacertpublisher.NewOptions()
	rc.RootCAFile = caFile
	m, err := manager.NewBuilder("it-builtins").
		WithRESTConfig(env.Config()).
		WithOptions(manager.Options{Serving: serving.Options{SecurePort: -1}, Controllers: []string{"*", "tokencleaner"}}).
		Register(
			podgc.Descriptor(gc),
			serviceaccount.Descriptor(serviceaccount.NewOptions()),
			tokencleaner.Descriptor(tokencleaner.NewOptions()),
			rootcacertpublisher.Descriptor(rc),
			ttlafterfinished.Descriptor(ttlafterfinished.NewOptions()),
		).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, m)
	for _, name := range []string{podgc.Name, serviceaccount.Name, tokencleaner.Name, rootcacertpublisher.Name, ttlafterfinished.Name} {
		poll.UntilContext(t, name+" to run", func(context.Context) (bool, error) {
			st, _ := m.Status(name)
			return st.Phase == manager.PhaseRunning, nil
		})
	}

	ns := namespace(t, cs)

	t.Run("default service account", func(t *testing.T) { testDefaultServiceAccount(t, cs, ns) })

	t.Run("root CA config map", func(t *testing.T) { testRootCA(t, cs, ns, ca) })

	t.Run("finished job deleted after its TTL", func(t *testing.T) {
		testFinishedJob(t, cs, ns)
	})

	t.Run("expired bootstrap token deleted", func(t *testing.T) {
		secrets := cs.CoreV1().Secrets(metav1.NamespaceSystem)
		token := func(expires time.Time) *corev1.Secret {
			id := utilrand.String(6)
			return &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id},
				Type:       corev1.SecretTypeBootstrapToken,
				StringData: map[string]string{
					"token-id":                 id,
					"token-secret":             utilrand.String(16),
					tokencleaner.ExpirationKey: expires.UTC().Format(time.RFC3339),
				},
			}
		}
		valid, err := secrets.Create(t.Context(), token(time.Now().Add(time.Hour)), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = secrets.Delete(context.Background(), valid.Name, metav1.DeleteOptions{}) }()
		expired, err := secrets.Create(t.Context(), token(time.Now().Add(-time.Minute)), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		poll.UntilContext(t, "the expired token to be deleted",
			func(ctx context.Context) (bool, error) {
				_, err := secrets.Get(ctx, expired.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
		if _, err := secrets.Get(t.Context(), valid.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("the unexpired token: %v", err)
		}
	})

	t.Run("pod of a missing node deleted after the quarantine", func(t *testing.T) {
		testOrphanedPod(t, cs, ns)
	})
}

// testFinishedJob marks a Job with ttlSecondsAfterFinished 0 complete (there
// is no job controller) and waits for its Foreground deletion. With no
// garbage collector either, the Job keeps its foregroundDeletion finalizer;
// the test checks it and then removes it, playing the garbage collector.
func testFinishedJob(t *testing.T, cs kubernetes.Interface, ns string) {
	jobs := cs.BatchV1().Jobs(ns)
	job, err := jobs.Create(t.Context(), &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "finished"},
		Spec: batchv1.JobSpec{
			TTLSecondsAfterFinished: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	started := metav1.NewTime(now.Add(-2 * time.Second))
	job.Status = batchv1.JobStatus{
		StartTime:      &started,
		CompletionTime: &now,
		Succeeded:      1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	if _, err := jobs.UpdateStatus(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *batchv1.Job
	poll.UntilContext(t, "the job to be deleted", func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		last = j
		return err == nil && j.DeletionTimestamp != nil, nil
	})
	// With Foreground propagation the API server keeps the Job, with the
	// foregroundDeletion finalizer, until a garbage collector (there is none
	// here) removes it: a Job that is gone at once was not deleted that way.
	if last == nil || last.DeletionTimestamp == nil {
		t.Fatal("job gone at once: deleted without Foreground propagation")
	}
	if !slices.Contains(last.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Errorf("job deleted without Foreground propagation: finalizers %v", last.Finalizers)
	}
	if _, err := jobs.Patch(t.Context(), job.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	poll.UntilContext(t, "the job to be gone", func(ctx context.Context) (bool, error) {
		_, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// testOrphanedPod creates a pod bound to a node that does not exist and
// watches podgc mark it Failed with a DisruptionTarget condition and delete
// it once the (shortened) quarantine has passed.
func testOrphanedPod(t *testing.T, cs kubernetes.Interface, ns string) {
	pods := cs.CoreV1().Pods(ns)
	// Pod admission needs the default service account.
	poll.UntilContext(t, "the default service account", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	w, err := pods.Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created := time.Now()
	pod, err := pods.Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan"},
		Spec: corev1.PodSpec{
			NodeName:                     "it-missing-node-" + ns,
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var markedFailed bool
	timeout := time.After(builtinTimeout)
	for {
		select {
		case <-timeout:
			t.Fatalf("pod %s/%s not deleted within %v (marked failed: %v)", ns, pod.Name, builtinTimeout, markedFailed)
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || p.UID != pod.UID {
				continue
			}
			if p.Status.Phase == corev1.PodFailed && hasDisruptionTarget(p) {
				markedFailed = true
			}
			if ev.Type != watch.Deleted {
				continue
			}
			if !markedFailed {
				t.Error("pod deleted without first being marked Failed with a DisruptionTarget condition")
			}
			if d := time.Since(created); d < gcQuarantineFloor {
				t.Errorf("pod deleted %v after creation, before the quarantine could pass", d)
			}
			return
		}
	}
}

// gcQuarantineFloor is the shortest time podgc may take with the test's
// one-second quarantine.
const gcQuarantineFloor = time.Second

func hasDisruptionTarget(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "DeletionByPodGC" {
			return true
		}
	}
	return false
}

// testDefaultServiceAccount: the namespace gets its default ServiceAccount,
// and gets it back after it is deleted.
func testDefaultServiceAccount(t *testing.T, cs kubernetes.Interface, ns string) {
	sas := cs.CoreV1().ServiceAccounts(ns)
	var first types.UID
	poll.UntilContext(t, "the default service account", func(ctx context.Context) (bool, error) {
		sa, err := sas.Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			first = sa.UID
		}
		return err == nil, nil
	})
	if err := sas.Delete(t.Context(), "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.UntilContext(t, "the default service account to be recreated",
		func(ctx context.Context) (bool, error) {
			sa, err := sas.Get(ctx, "default", metav1.GetOptions{})
			return err == nil && sa.UID != first, nil
		})
}

// testRootCA: the namespace gets kube-root-ca.crt with the CA bundle, and
// it is recreated after deletion and fixed after an edit.
func testRootCA(t *testing.T, cs kubernetes.Interface, ns string, ca []byte) {
	cms := cs.CoreV1().ConfigMaps(ns)
	published := func(ctx context.Context) (bool, error) {
		cm, err := cms.Get(ctx, rootcacertpublisher.ConfigMapName, metav1.GetOptions{})
		return err == nil && cm.Data[rootcacertpublisher.DataKey] == string(ca) &&
			cm.Annotations[rootcacertpublisher.DescriptionAnnotation] == rootcacertpublisher.Description, nil
	}
	poll.UntilContext(t, "kube-root-ca.crt", published)
	if err := cms.Delete(t.Context(), rootcacertpublisher.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.UntilContext(t, "kube-root-ca.crt to be recreated", published)
	cm, err := cms.Get(t.Context(), rootcacertpublisher.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[rootcacertpublisher.DataKey] = "tampered"
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.UntilContext(t, "kube-root-ca.crt to be fixed", published)
}
