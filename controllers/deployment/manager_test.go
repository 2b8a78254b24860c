package deployment_test

import (
	"strconv"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/deployment"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// TestManagerRollsOutDeployment runs the controller in a Manager over a
// fake clientset, through its informers, handlers and work loop: a new
// Deployment gets its ReplicaSet; once the ReplicaSet reports its pods
// available (the test plays the ReplicaSet controller), the Deployment is
// Available and complete. It does so on the leader, and sharded by
// namespace under --enable-sharding (the one replica then holds every
// slot, each slot term with its own instance).
func TestManagerRollsOutDeployment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options func(*managertest.Harness)
	}{
		{"on the leader", func(*managertest.Harness) {}},
		{"sharded", func(h *managertest.Harness) { h.ShardedAlone("a", slots) }},
	} {
		t.Run(tc.name, func(t *testing.T) { rollOut(t, tc.options) })
	}
}

const slots = 4

func rollOut(t *testing.T, options func(*managertest.Harness)) {
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web", Generation: 1},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "img"}},
				},
			},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RecreateDeploymentStrategyType,
			},
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
	h := managertest.New(
		t,
		"test",
		[]descriptor.Descriptor{deployment.Descriptor(deployment.NewOptions())},
		d,
	)
	// The fake API server sets neither UIDs nor resourceVersions on
	// ReplicaSets; informers take an update with an unchanged
	// resourceVersion for a resync, so give each write one.
	var rv atomic.Int64
	stamp := func(a clienttesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(interface{ GetObject() runtime.Object }); ok {
			if rs, ok := o.GetObject().(*appsv1.ReplicaSet); ok {
				rs.UID = types.UID("uid-" + rs.Name)
				rs.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
			}
		}
		return false, nil, nil
	}
	h.Client.PrependReactor("create", "replicasets", stamp)
	h.Client.PrependReactor("update", "replicasets", stamp)
	options(h)
	h.Start()
	if h.Options.Sharding.Enabled {
		managertest.Eventually(t, "every slot held", func() bool {
			st, _ := h.Manager.Status(deployment.Name)
			return len(st.Slots) == slots
		})
	}
	ctx := t.Context()
	var rs *appsv1.ReplicaSet
	controllertest.WaitFor(t, "the ReplicaSet to be created", func() bool {
		l, err := h.Client.AppsV1().ReplicaSets("ns").List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 1 {
			return false
		}
		rs = &l.Items[0]
		return true
	})
	if ptr.Deref(rs.Spec.Replicas, 0) != 2 ||
		rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == "" ||
		rs.Name != "web-"+rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] {
		t.Fatalf("ReplicaSet %s replicas %v labels %v", rs.Name, rs.Spec.Replicas, rs.Labels)
	}
	rs.Status = appsv1.ReplicaSetStatus{
		Replicas:             2,
		FullyLabeledReplicas: 2,
		ReadyReplicas:        2,
		AvailableReplicas:    2,
		TerminatingReplicas:  ptr.To[int32](0),
	}
	if _, err := h.Client.AppsV1().ReplicaSets("ns").UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the Deployment to be complete", func() bool {
		got, err := h.Client.AppsV1().Deployments("ns").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false
		}
		var progressing, available string
		for _, c := range got.Status.Conditions {
			switch c.Type {
			case appsv1.DeploymentProgressing:
				progressing = c.Reason
			case appsv1.DeploymentAvailable:
				available = c.Reason
			}
		}
		return got.Status.AvailableReplicas == 2 && got.Status.UpdatedReplicas == 2 &&
			progressing == "NewReplicaSetAvailable" && available == "MinimumReplicasAvailable" &&
			got.Annotations["deployment.kubernetes.io/revision"] == "1"
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
