package garbagecollector

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestGraphFromEvents: adds, updates and deletes build the graph: a
// dependent seen before its owner makes a virtual owner (queued for
// verification) that the owner's own add makes observed; dropping a
// reference unlinks it; deleting an owner queues its dependents and
// remembers it as absent.
func TestGraphFromEvents(t *testing.T) {
	f := newFixture(t)
	dep := cm("ns", "dep", "d1", owner("own", "o1", false))
	f.add(dep)
	o := f.node("o1")
	if o.observed() || !f.deleted.has("o1") {
		t.Fatalf(
			"owner seen only in a reference: observed=%v queued=%v, want a virtual node queued for verification",
			o.observed(),
			f.deleted.has("o1"),
		)
	}
	if got := o.identity(); got != (objectRef{APIVersion: "v1", Kind: "ConfigMap", Name: "own", UID: "o1", Namespace: "ns"}) {
		t.Errorf("virtual owner identity %v", got)
	}
	f.add(cm("ns", "own", "o1"))
	if !f.node("o1").observed() {
		t.Error("owner still virtual after its add event")
	}
	if deps := f.node("o1").dependentList(); len(deps) != 1 || deps[0].identity().UID != "d1" {
		t.Fatalf("owner's dependents %v, want d1", deps)
	}

	// A second owner is added, then the first reference is dropped.
	f.add(cm("ns", "own2", "o2"))
	both := cm("ns", "dep", "d1", owner("own", "o1", false), owner("own2", "o2", false))
	f.update(dep, both)
	if f.node("o2").dependentCount() != 1 {
		t.Error("added reference not linked")
	}
	only2 := cm("ns", "dep", "d1", owner("own2", "o2", false))
	f.update(both, only2)
	if f.node("o1").dependentCount() != 0 {
		t.Error("dropped reference still linked")
	}

	// Deleting the remaining owner queues the dependent and caches the
	// owner as absent.
	f.deleted.keys = nil
	f.remove(cm("ns", "own2", "o2"))
	if _, ok := f.gc.graph.get("o2"); ok {
		t.Error("deleted owner still in the graph")
	}
	if !f.deleted.has("d1") {
		t.Error("dependent of a deleted owner not queued")
	}
	if _, ok := f.gc.absent.Get(objectRef{APIVersion: "v1", Kind: "ConfigMap", Name: "own2", UID: "o2", Namespace: "ns"}); !ok {
		t.Error("deleted owner not remembered as absent")
	}
	f.remove(only2)
	if _, ok := f.gc.graph.get("d1"); ok {
		t.Error("deleted dependent still in the graph")
	}
}

// TestTransitions: an object whose deletion starts with the orphan
// finalizer goes to the orphan queue; with foregroundDeletion it is marked
// as deleting dependents and it and its dependents go to the delete queue.
func TestTransitions(t *testing.T) {
	tests := []struct {
		name        string
		finalizer   string
		wantOrphan  bool
		wantDeletes []types.UID
	}{
		{"orphan", metav1.FinalizerOrphanDependents, true, nil},
		{"foreground", metav1.FinalizerDeleteDependents, false, []types.UID{"d1", "o1"}},
		{"other finalizer", "example.com/x", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			own := cm("ns", "own", "o1")
			f.add(own, cm("ns", "dep", "d1", owner("own", "o1", true)))
			f.deleted.keys = nil
			f.update(own, deleting(own, tt.finalizer))
			if got := f.orphaned.has("o1"); got != tt.wantOrphan {
				t.Errorf("orphan queued %v, want %v", got, tt.wantOrphan)
			}
			if len(f.deleted.keys) != len(tt.wantDeletes) {
				t.Errorf("delete queue %v, want %v", f.deleted.keys, tt.wantDeletes)
			}
			for _, u := range tt.wantDeletes {
				if !f.deleted.has(u) {
					t.Errorf("%s not queued for deletion (queue %v)", u, f.deleted.keys)
				}
			}
			n := f.node("o1")
			if !n.isBeingDeleted() ||
				n.isDeletingDependents() != (tt.finalizer == metav1.FinalizerDeleteDependents) {
				t.Errorf(
					"beingDeleted %v deletingDependents %v",
					n.isBeingDeleted(),
					n.isDeletingDependents(),
				)
			}
		})
	}
}

// TestUnblockingQueuesOwner: a dependent that stops blocking its owner
// (reference removed, or blockOwnerDeletion turned off) queues the owner,
// which may be waiting for it.
func TestUnblockingQueuesOwner(t *testing.T) {
	tests := []struct {
		name  string
		after []metav1.OwnerReference
		want  bool
	}{
		{"reference removed", nil, true},
		{"block turned off", []metav1.OwnerReference{owner("own", "o1", false)}, true},
		{
			"still blocking",
			[]metav1.OwnerReference{
				{
					APIVersion:         "v1",
					Kind:               "ConfigMap",
					Name:               "own",
					UID:                "o1",
					BlockOwnerDeletion: new(true),
					Controller:         new(true),
				},
			},
			false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			dep := cm("ns", "dep", "d1", owner("own", "o1", true))
			f.add(cm("ns", "own", "o1"), dep)
			f.deleted.keys = nil
			after := dep.DeepCopy()
			after.OwnerReferences = tt.after
			f.update(dep, after)
			if got := f.deleted.has("o1"); got != tt.want {
				t.Errorf("owner queued %v, want %v", got, tt.want)
			}
		})
	}
}

// TestInvalidNamespaceOwnerEvent: a namespaced owner in another namespace
// is reported on the dependent with KCM's reason and message, whether the
// owner is seen before or after the dependent, and the dependent is
// queued to be judged.
func TestInvalidNamespaceOwnerEvent(t *testing.T) {
	own := cm("other", "own", "o1")
	dep := cm("ns", "dep", "d1", owner("own", "o1", false))
	want := `Warning OwnerRefInvalidNamespace ownerRef [v1/ConfigMap, namespace: ns, name: own, uid: o1] does not exist in namespace "ns"`
	for _, order := range [][]*metav1.PartialObjectMetadata{{own, dep}, {dep, own}} {
		t.Run(order[0].Name+" first", func(t *testing.T) {
			f := newFixture(t)
			f.add(order...)
			select {
			case got := <-f.recorder.Events:
				if got != want {
					t.Errorf("event %q, want %q", got, want)
				}
			default:
				t.Fatal("no event recorded")
			}
			if !f.deleted.has("d1") {
				t.Error("dependent with an invalid owner reference not queued")
			}
		})
	}
}

// TestClusterScopedDependentEvent: a cluster-scoped object naming a
// namespaced owner is reported too (the owner cannot be in its
// "namespace"), whether the owner is seen first or not.
func TestClusterScopedDependentEvent(t *testing.T) {
	own := cm("ns", "own", "o1")
	dep := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "n",
			UID:             "n1",
			OwnerReferences: []metav1.OwnerReference{owner("own", "o1", false)},
		},
	}
	want := `Warning OwnerRefInvalidNamespace ownerRef [v1/ConfigMap, namespace: , name: own, uid: o1] does not exist in namespace ""`
	for _, ownerFirst := range []bool{true, false} {
		t.Run(
			map[bool]string{true: "owner first", false: "dependent first"}[ownerFirst],
			func(t *testing.T) {
				f := newFixture(t)
				addNode := func() {
					f.gc.processChange(
						testLog(t),
						&change{kind: added, gvk: dep.GroupVersionKind(), obj: dep},
					)
				}
				if ownerFirst {
					f.add(own)
					addNode()
				} else {
					addNode()
					f.add(own)
				}
				select {
				case got := <-f.recorder.Events:
					if got != want {
						t.Errorf("event %q, want %q", got, want)
					}
				default:
					t.Fatal("no event recorded")
				}
			},
		)
	}
}
