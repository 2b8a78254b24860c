package index

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func pod(name, ns string, ref *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if ref != nil {
		p.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	return p
}

func TestOwnedAndOrphans(t *testing.T) {
	yes := true
	rs := &metav1.OwnerReference{Kind: "ReplicaSet", Name: "web", UID: "u1", Controller: &yes}
	other := &metav1.OwnerReference{Kind: "ReplicaSet", Name: "web", UID: "u2", Controller: &yes}
	ds := &metav1.OwnerReference{Kind: "DaemonSet", Name: "web", UID: "u1", Controller: &yes}
	notController := &metav1.OwnerReference{Kind: "ReplicaSet", Name: "web", UID: "u1"}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, PodsByControllerIndexers())
	for _, p := range []*corev1.Pod{
		pod("owned", "a", rs), pod("orphan", "a", nil), pod("weak-ref", "a", notController),
		pod("other-uid", "a", other), pod("other-kind", "a", ds), pod("other-ns", "b", rs), pod("orphan-b", "b", nil),
	} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := OwnedAndOrphans(idx, "a", "ReplicaSet", "web", "u1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	// Owned first, then the orphans (a pod whose only reference is not a
	// controller reference is an orphan).
	if len(names) != 3 || names[0] != "owned" ||
		!(names[1] == "orphan" && names[2] == "weak-ref" || names[1] == "weak-ref" && names[2] == "orphan") {
		t.Errorf("OwnedAndOrphans = %v, want [owned] then [orphan weak-ref]", names)
	}
}

func TestAddIsIdempotentOnAStartedInformer(t *testing.T) {
	cs := fake.NewClientset()
	inf := informers.NewSharedInformerFactory(cs, 0).Core().V1().Pods().Informer()
	for range 2 {
		if err := AddPodsByController(inf); err != nil {
			t.Fatalf("AddPodsByController: %v", err)
		}
	}
	stop := make(chan struct{})
	defer close(stop)
	go inf.Run(stop)
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	// Present already: no error although the informer has started.
	if err := AddPodsByController(inf); err != nil {
		t.Errorf("AddPodsByController on a started informer with the index: %v", err)
	}
	// Absent on a started informer: client-go 1.37 indexes what it holds.
	if err := Add(inf, "new", func(any) ([]string, error) { return nil, nil }); err != nil {
		t.Errorf("Add of a new index to a started informer: %v", err)
	}
	if _, ok := inf.GetIndexer().GetIndexers()["new"]; !ok {
		t.Error("the new index is missing")
	}
}

func TestByControllerUID(t *testing.T) {
	yes := true
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, ByControllerUIDIndexers())
	for _, p := range []*corev1.Pod{
		pod("a", "ns", &metav1.OwnerReference{Kind: "ReplicaSet", Name: "x", UID: "u1", Controller: &yes}),
		pod("b", "other", &metav1.OwnerReference{Kind: "Job", Name: "y", UID: "u1", Controller: &yes}),
		pod("c", "ns", &metav1.OwnerReference{Kind: "ReplicaSet", Name: "x", UID: "u1"}),
		pod("d", "ns", nil),
	} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := idx.ByIndex(ByControllerUID, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Errorf(
			"%d objects under u1, want the 2 it controls (a reference that is not a controller's does not count)",
			len(objs),
		)
	}
	if keys := idx.ListIndexFuncValues(ByControllerUID); len(keys) != 1 {
		t.Errorf("index keys %v, want only u1 (objects without a controller are not indexed)", keys)
	}
}

func TestPodsByNode(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, PodsByNodeIndexers())
	bound := func(name, node string) *corev1.Pod {
		p := pod(name, "ns", nil)
		p.Spec.NodeName = node
		return p
	}
	pods := []*corev1.Pod{bound("a", "n1"), bound("b", "n1"), bound("c", "n2"), bound("d", "")}
	for _, p := range pods {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := idx.ByIndex(PodsByNode, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Errorf("%d pods on n1, want 2", len(objs))
	}
	if keys := idx.ListIndexFuncValues(PodsByNode); len(keys) != 2 {
		t.Errorf("index keys %v, want n1 and n2 only (an unbound pod is not indexed)", keys)
	}
}
