package replicaset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// TestStatusWriteArmsStalenessGuard: after a status write, the key is held
// until the owner informer delivers the written resourceVersion, as KCM
// 1.36+ does so a sync never works from a status older than its own write.
func TestStatusWriteArmsStalenessGuard(t *testing.T) {
	rs := newRS("web", 1, func(rs *appsv1.ReplicaSet) {
		rs.UID = "rs-uid"
		rs.ResourceVersion = "10"
	})
	rs.Spec.Replicas = ptr.To[int32](0) // no pods to create: only the status changes
	f := newFixture(t, kindRS, rs)
	f.client.PrependReactor(
		"update",
		"replicasets",
		func(a clienttesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "status" {
				return false, nil, nil
			}
			written := a.(clienttesting.UpdateAction).GetObject().(*appsv1.ReplicaSet).DeepCopy()
			written.ResourceVersion = "11" // what an API server would assign
			return true, written, nil
		},
	)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if f.count("update replicasets/status") != 1 {
		t.Fatalf("want one status update, got %d", f.count("update replicasets/status"))
	}
	if !f.c.loop.Stale("ns/web") {
		t.Fatal("key not held after the status write")
	}
	older := rs.DeepCopy()
	f.c.updateOwner(rs, older) // a resync at the old version
	if !f.c.loop.Stale("ns/web") {
		t.Fatal("key released by an event older than the write")
	}
	delivered := rs.DeepCopy()
	delivered.ResourceVersion = "11"
	f.c.updateOwner(rs, delivered)
	if f.c.loop.Stale("ns/web") {
		t.Error("key still held after the informer delivered the write")
	}
}

// TestPodCreateArmsStalenessGuard: a pod created for a ReplicaSet holds the
// ReplicaSet's key until the pod informer has delivered that pod, as KCM
// 1.36+ guards pod writes too.
func TestPodCreateArmsStalenessGuard(t *testing.T) {
	rs := newRS("web", 1, func(rs *appsv1.ReplicaSet) { rs.UID = "rs-uid" })
	f := newFixture(t, kindRS, rs)
	var created *corev1.Pod
	f.client.PrependReactor(
		"create",
		"pods",
		func(a clienttesting.Action) (bool, runtime.Object, error) {
			p := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy()
			// As an API server returns it: named, with a uid and a version.
			p.Namespace, p.Name, p.UID, p.ResourceVersion = a.GetNamespace(), "web-abcde", "pod-uid", "20"
			created = p
			return true, p, nil
		},
	)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if created == nil {
		t.Fatal("no pod created")
	}
	if !f.c.loop.Stale("ns/web") {
		t.Fatal("key not held after a pod was created for it")
	}
	f.c.addPod(created)
	if f.c.loop.Stale("ns/web") {
		t.Error("key still held after the informer delivered the pod")
	}
}
