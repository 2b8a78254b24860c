//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/replicaset"
	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
)

// rsTimeout bounds each wait for the controllers to converge.
const rsTimeout = 60 * time.Second

// replicated is one of the two kinds under test, reduced to what the test
// needs.
type replicated struct {
	kind string
	// create makes an object selecting app=<name> with replicas pods.
	create func(ctx context.Context, cs kubernetes.Interface, ns, name string, replicas int32) (types.UID, error)
	// status returns spec.replicas' observed count: status.replicas.
	status func(ctx context.Context, cs kubernetes.Interface, ns, name string) (int32, error)
	// resource names the kind for a scale patch.
	resource string
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

var replicatedKinds = []replicated{
	{
		kind:     "ReplicaSet",
		resource: "replicasets",
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string, n int32) (types.UID, error) {
			rs, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: appsv1.ReplicaSetSpec{
					Replicas: ptr.To(n),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
					Template: podTemplate(name),
				},
			}, metav1.CreateOptions{})
			if err != nil {
				return "", err
			}
			return rs.UID, nil
		},
		status: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (int32, error) {
			rs, err := cs.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			return rs.Status.Replicas, nil
		},
	},
	{
		kind:     "ReplicationController",
		resource: "replicationcontrollers",
		create: func(ctx context.Context, cs kubernetes.Interface, ns, name string, n int32) (types.UID, error) {
			tmpl := podTemplate(name)
			rc, err := cs.CoreV1().ReplicationControllers(ns).Create(ctx, &corev1.ReplicationController{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.ReplicationControllerSpec{
					Replicas: ptr.To(n),
					Selector: map[string]string{"app": name},
					Template: &tmpl,
				},
			}, metav1.CreateOptions{})
			if err != nil {
				return "", err
			}
			return rc.UID, nil
		},
		status: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (int32, error) {
			rc, err := cs.CoreV1().ReplicationControllers(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			return rc.Status.Replicas, nil
		},
	},
}

// scale sets spec.replicas with a merge patch.
func (r replicated) scale(ctx context.Context, cs kubernetes.Interface, ns, name string, n int32) error {
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
	var err error
	if r.kind == "ReplicaSet" {
		_, err = cs.AppsV1().ReplicaSets(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = cs.CoreV1().ReplicationControllers(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	return err
}

// activePods lists the pods labelled app=app that are not being deleted.
func activePods(ctx context.Context, cs kubernetes.Interface, ns, app string) ([]corev1.Pod, error) {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(map[string]string{"app": app}).String()})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// converge polls until the object's status and its active pods both show
// want, failing at once if the pod count leaves [low, high], and then keeps
// polling for hold to check that it stays at want.
func converge(t *testing.T, cs kubernetes.Interface, r replicated, ns, name string, want, low, high int, hold time.Duration) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(rsTimeout)
	var reached time.Time
	for {
		pods, err := activePods(ctx, cs, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(pods); n < low || n > high {
			t.Fatalf("%s %s: %d active pods, outside [%d, %d]", r.kind, name, n, low, high)
		}
		if reached.IsZero() {
			replicas, err := r.status(ctx, cs, ns, name)
			if err != nil {
				t.Fatal(err)
			}
			if int(replicas) == want && len(pods) == want {
				reached = time.Now()
				low, high = want, want // from now on it must hold
			} else if time.Now().After(deadline) {
				t.Fatalf("%s %s: after %v, status.replicas %d and %d active pods; want %d", r.kind, name, rsTimeout, replicas, len(pods), want)
			}
		} else if time.Since(reached) >= hold {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestReplicaSetControllers runs both controllers against kube-apiserver:
// a new object gets exactly its replicas, scaling down deletes the
// surplus, and an orphan matching the selector is adopted.
func TestReplicaSetControllers(t *testing.T) {
	env := sharedEnv(t)
	cs := clientset(t, env.Config())
	opts := replicaset.NewOptions()
	m, err := manager.NewBuilder("it-rs").
		WithRESTConfig(env.Config()).
		WithOptions(manager.Options{Serving: serving.Options{SecurePort: -1}}).
		Register(replicaset.Descriptor(opts), replicaset.ReplicationControllerDescriptor(opts)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	done := runManager(t, m)
	// Wait for both controllers to run before creating objects.
	names := []string{replicaset.ReplicaSetControllerName,
		replicaset.ReplicationControllerControllerName}
	var name string
	var st manager.ControllerStatus
	if !poll.For(rsTimeout, func() bool {
		for len(names) > 0 {
			name = names[0]
			if st, _ = m.Status(name); st.Phase != manager.PhaseRunning {
				select {
				case err := <-done:
					t.Fatalf("manager stopped: %v", err)
				default:
				}
				return false
			}
			names = names[1:]
		}
		return true
	}) {
		t.Fatalf("%s: phase %q (err %v) after %v", name, st.Phase, st.Err, rsTimeout)
	}

	for _, r := range replicatedKinds {
		t.Run(r.kind, func(t *testing.T) { testReplicated(t, cs, r) })
	}
}

// testReplicated is the scenario for one kind (ReplicaSet or
// ReplicationController), whoever runs the controllers: a new object of 5
// gets exactly 5 pods, scaled to 2 it loses 3, and a matching orphan is
// adopted.
func testReplicated(t *testing.T, cs kubernetes.Interface, r replicated) {
	ns := namespace(t, cs)
	// Without the service-account controller nobody creates the
	// default account, and the ServiceAccount admission plugin
	// refuses pods without one.
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	if _, err := r.create(t.Context(), cs, ns, "web", 5); err != nil {
		t.Fatal(err)
	}
	converge(t, cs, r, ns, "web", 5, 0, 5, time.Second)

	if err := r.scale(t.Context(), cs, ns, "web", 2); err != nil {
		t.Fatal(err)
	}
	// Unscheduled pods are deleted at once (no kubelet to wait for).
	converge(t, cs, r, ns, "web", 2, 2, 5, time.Second)

	// An orphan matching a new object's selector. It is scheduled
	// (nodeName set), so if the controller saw the object before the
	// orphan and created a pod of its own, that unscheduled pod is
	// the one removed.
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: map[string]string{"app": "adopter"}},
		Spec:       corev1.PodSpec{NodeName: "node-without-kubelet", Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	uid, err := r.create(t.Context(), cs, ns, "adopter", 1)
	if err != nil {
		t.Fatal(err)
	}
	converge(t, cs, r, ns, "adopter", 1, 0, 2, 0)
	got, err := cs.CoreV1().Pods(ns).Get(t.Context(), "orphan", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(got)
	if ref == nil || ref.UID != uid || ref.Kind != r.kind || got.DeletionTimestamp != nil {
		t.Errorf("orphan after adoption: controller %+v, deletionTimestamp %v; want %s %s", ref, got.DeletionTimestamp, r.kind, uid)
	}
}
