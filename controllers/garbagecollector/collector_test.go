package garbagecollector

import (
	"encoding/json"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// TestAttemptToDelete: the attempt-to-delete worker judges an object by
// its owners as read from the API server.
func TestAttemptToDelete(t *testing.T) {
	ownLive := cm("ns", "own", "o1")
	ownWaiting := deleting(ownLive, metav1.FinalizerDeleteDependents)
	tests := []struct {
		name string
		live []*metav1.PartialObjectMetadata // on the server
		seen []*metav1.PartialObjectMetadata // in the graph
		item string
		// wantDelete is the propagation policy of the delete, "" for none.
		wantDelete metav1.DeletionPropagation
		// wantPatch is a substring of the patch sent, "" for none.
		wantPatch string
	}{
		{
			name: "all owners absent: background delete",
			live: []*metav1.PartialObjectMetadata{
				cm("ns", "dep", "d1", owner("gone", "g1", false)),
			},
			seen: []*metav1.PartialObjectMetadata{
				cm("ns", "dep", "d1", owner("gone", "g1", false)),
			},
			item:       "d1",
			wantDelete: metav1.DeletePropagationBackground,
		},
		{
			name: "owner replaced by another uid: background delete",
			live: []*metav1.PartialObjectMetadata{
				cm("ns", "own", "new"),
				cm("ns", "dep", "d1", owner("own", "o1", false)),
			},
			seen: []*metav1.PartialObjectMetadata{
				cm("ns", "dep", "d1", owner("own", "o1", false)),
			},
			item:       "d1",
			wantDelete: metav1.DeletePropagationBackground,
		},
		{
			name: "absent owners, item has the orphan finalizer: orphan delete",
			live: []*metav1.PartialObjectMetadata{func() *metav1.PartialObjectMetadata {
				o := cm("ns", "dep", "d1", owner("gone", "g1", false))
				o.Finalizers = []string{metav1.FinalizerOrphanDependents}
				return o
			}()},
			seen: []*metav1.PartialObjectMetadata{
				cm("ns", "dep", "d1", owner("gone", "g1", false)),
			},
			item:       "d1",
			wantDelete: metav1.DeletePropagationOrphan,
		},
		{
			name: "one absent of two: the absent reference is patched out",
			live: []*metav1.PartialObjectMetadata{
				ownLive,
				cm("ns", "dep", "d1", owner("gone", "g1", false), owner("own", "o1", false)),
			},
			seen: []*metav1.PartialObjectMetadata{
				ownLive,
				cm("ns", "dep", "d1", owner("gone", "g1", false), owner("own", "o1", false)),
			},
			item:      "d1",
			wantPatch: `{"metadata":{"uid":"d1","ownerReferences":[{"$patch":"delete","uid":"g1"}]}}`,
		},
		{
			name: "owner exists: nothing",
			live: []*metav1.PartialObjectMetadata{
				ownLive,
				cm("ns", "dep", "d1", owner("own", "o1", false)),
			},
			seen: []*metav1.PartialObjectMetadata{
				ownLive,
				cm("ns", "dep", "d1", owner("own", "o1", false)),
			},
			item: "d1",
		},
		{
			name: "no owners: nothing",
			live: []*metav1.PartialObjectMetadata{cm("ns", "lone", "l1")},
			seen: []*metav1.PartialObjectMetadata{cm("ns", "lone", "l1")},
			item: "l1",
		},
		{
			name: "owner waits for dependents, item has dependents: foreground delete",
			live: []*metav1.PartialObjectMetadata{
				ownWaiting,
				cm("ns", "dep", "d1", owner("own", "o1", true)),
				cm("ns", "grand", "g", owner("dep", "d1", true)),
			},
			seen: []*metav1.PartialObjectMetadata{
				ownWaiting,
				cm("ns", "dep", "d1", owner("own", "o1", true)),
				cm("ns", "grand", "g", owner("dep", "d1", true)),
			},
			item:       "d1",
			wantDelete: metav1.DeletePropagationForeground,
		},
		{
			name: "owner waits for dependents, item has none: background delete",
			live: []*metav1.PartialObjectMetadata{
				ownWaiting,
				cm("ns", "dep", "d1", owner("own", "o1", true)),
			},
			seen: []*metav1.PartialObjectMetadata{
				ownWaiting,
				cm("ns", "dep", "d1", owner("own", "o1", true)),
			},
			item:       "d1",
			wantDelete: metav1.DeletePropagationBackground,
		},
		{
			name: "one owner exists, another waits: the waiting reference is patched out",
			live: []*metav1.PartialObjectMetadata{
				ownWaiting,
				cm("ns", "keep", "k1"),
				cm("ns", "dep", "d1", owner("own", "o1", true), owner("keep", "k1", false)),
			},
			seen: []*metav1.PartialObjectMetadata{
				ownWaiting,
				cm("ns", "keep", "k1"),
				cm("ns", "dep", "d1", owner("own", "o1", true), owner("keep", "k1", false)),
			},
			item:      "d1",
			wantPatch: `"ownerReferences":[{"$patch":"delete","uid":"o1"}]`,
		},
		{
			name: "item being deleted: nothing",
			live: []*metav1.PartialObjectMetadata{
				deleting(cm("ns", "dep", "d1", owner("gone", "g1", false)), "example.com/x"),
			},
			seen: []*metav1.PartialObjectMetadata{
				deleting(cm("ns", "dep", "d1", owner("gone", "g1", false)), "example.com/x"),
			},
			item: "d1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.live...)
			f.add(tt.seen...)
			f.client.ClearActions()
			if err := f.gc.attemptToDelete(controllertest.LogContext(t), tt.item); err != nil {
				t.Fatalf("attemptToDelete: %v", err)
			}
			dels := f.actionsOf("delete")
			switch {
			case tt.wantDelete == "" && len(dels) > 0:
				t.Errorf("unexpected delete %v", dels)
			case tt.wantDelete != "":
				if len(dels) != 1 {
					t.Fatalf("deletes %v, want one", dels)
				}
				d := dels[0].(clienttesting.DeleteActionImpl)
				opts := d.DeleteOptions
				if d.Name != f.node(tt.item).identity().Name || opts.PropagationPolicy == nil ||
					*opts.PropagationPolicy != tt.wantDelete {
					t.Errorf(
						"delete %s with %v, want %s with %s",
						d.Name,
						opts.PropagationPolicy,
						f.node(tt.item).identity().Name,
						tt.wantDelete,
					)
				}
				if opts.Preconditions == nil || opts.Preconditions.UID == nil ||
					*opts.Preconditions.UID != types.UID(tt.item) ||
					opts.Preconditions.ResourceVersion == nil ||
					*opts.Preconditions.ResourceVersion != "1" {
					t.Errorf(
						"delete preconditions %+v, want the uid and the resource version read",
						opts.Preconditions,
					)
				}
			}
			patches := f.actionsOf("patch")
			switch {
			case tt.wantPatch == "" && len(patches) > 0:
				t.Errorf("unexpected patch %v", patches)
			case tt.wantPatch != "":
				if len(patches) != 1 {
					t.Fatalf("patches %v, want one", patches)
				}
				p := patches[0].(clienttesting.PatchActionImpl)
				if p.PatchType != types.StrategicMergePatchType ||
					!strings.Contains(string(p.Patch), tt.wantPatch) {
					t.Errorf(
						"patch %s %s, want a strategic merge patch containing %s",
						p.PatchType,
						p.Patch,
						tt.wantPatch,
					)
				}
			}
		})
	}
}

// TestAttemptToDeleteVirtualOwner: a virtual owner that the server does
// not have is removed from the graph (a virtual delete), its dependents
// queued and the owner remembered as absent; one the server has is
// requeued until its informer shows it.
func TestAttemptToDeleteVirtualOwner(t *testing.T) {
	f := newFixture(t, cm("ns", "dep", "d1", owner("gone", "g1", false)))
	f.add(cm("ns", "dep", "d1", owner("gone", "g1", false)))
	f.deleted.keys = nil
	if err := f.gc.attemptToDelete(controllertest.LogContext(t), "g1"); err != nil {
		t.Fatalf("attemptToDelete: %v", err)
	}
	f.fold()
	if _, ok := f.gc.graph.get("g1"); ok {
		t.Error("absent virtual owner still in the graph")
	}
	if !f.deleted.has("d1") {
		t.Error("dependent of the absent owner not queued")
	}

	f = newFixture(t, cm("ns", "own", "o1"))
	f.add(cm("ns", "dep", "d1", owner("own", "o1", false)))
	if err := f.gc.attemptToDelete(controllertest.LogContext(t), "o1"); err == nil ||
		!strings.Contains(err.Error(), "hasn't been observed") {
		t.Errorf("existing virtual owner: err %v, want a retry until observed", err)
	}
}

// TestMergePatchFallback: a resource that takes no strategic merge patch
// (a custom resource) gets a JSON merge patch of the remaining owner
// references, preconditioned on the resource version.
func TestMergePatchFallback(t *testing.T) {
	f := newFixture(
		t,
		cm("ns", "own", "o1"),
		cm("ns", "dep", "d1", owner("gone", "g1", false), owner("own", "o1", false)),
	)
	f.add(
		cm("ns", "own", "o1"),
		cm("ns", "dep", "d1", owner("gone", "g1", false), owner("own", "o1", false)),
	)
	f.client.PrependReactor(
		"patch",
		"*",
		func(a clienttesting.Action) (bool, runtime.Object, error) {
			if a.(clienttesting.PatchActionImpl).PatchType == types.StrategicMergePatchType {
				return true, nil, apierrors.NewGenericServerResponse(
					415,
					"patch",
					schema.GroupResource{Resource: "configmaps"},
					"dep",
					"",
					0,
					false,
				)
			}
			return false, nil, nil
		},
	)
	f.client.ClearActions()
	if err := f.gc.attemptToDelete(controllertest.LogContext(t), "d1"); err != nil {
		t.Fatalf("attemptToDelete: %v", err)
	}
	patches := f.actionsOf("patch")
	if len(patches) != 2 {
		t.Fatalf("patches %v, want a strategic one then a merge one", patches)
	}
	p := patches[1].(clienttesting.PatchActionImpl)
	var got struct {
		Metadata struct {
			ResourceVersion string                  `json:"resourceVersion"`
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(p.Patch, &got); err != nil {
		t.Fatal(err)
	}
	if p.PatchType != types.MergePatchType || got.Metadata.ResourceVersion != "1" ||
		len(got.Metadata.OwnerReferences) != 1 || got.Metadata.OwnerReferences[0].UID != "o1" {
		t.Errorf(
			"fallback patch %s %s, want a merge patch keeping only o1 at resourceVersion 1",
			p.PatchType,
			p.Patch,
		)
	}
}

// TestForegroundOwner: an owner deleting its dependents waits while a
// blocking dependent exists (queueing it), and loses its
// foregroundDeletion finalizer once none is left; a non-blocking
// dependent does not hold it.
func TestForegroundOwner(t *testing.T) {
	own := deleting(cm("ns", "own", "o1"), metav1.FinalizerDeleteDependents, "example.com/keep")
	tests := []struct {
		name         string
		dep          *metav1.PartialObjectMetadata
		wantFinalize bool
	}{
		{"blocking dependent", cm("ns", "dep", "d1", owner("own", "o1", true)), false},
		{"non-blocking dependent", cm("ns", "dep", "d1", owner("own", "o1", false)), true},
		{"no dependent", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := []*metav1.PartialObjectMetadata{own}
			if tt.dep != nil {
				live = append(live, tt.dep)
			}
			f := newFixture(t, live...)
			f.add(live...)
			f.deleted.keys = nil
			f.client.ClearActions()
			if err := f.gc.attemptToDelete(controllertest.LogContext(t), "o1"); err != nil {
				t.Fatalf("attemptToDelete: %v", err)
			}
			patches := f.actionsOf("patch")
			if !tt.wantFinalize {
				if len(patches) != 0 || !f.deleted.has("d1") {
					t.Errorf(
						"patches %v, queued %v: want no patch and the blocking dependent queued",
						patches,
						f.deleted.keys,
					)
				}
				return
			}
			if len(patches) != 1 {
				t.Fatalf("patches %v, want the finalizer removed", patches)
			}
			p := patches[0].(clienttesting.PatchActionImpl)
			if p.PatchType != types.MergePatchType ||
				string(
					p.Patch,
				) != `{"metadata":{"finalizers":["example.com/keep"],"resourceVersion":"1"}}` {
				t.Errorf("patch %s %s", p.PatchType, p.Patch)
			}
		})
	}
}

// TestOrphan: the orphan worker removes the owner's reference from every
// dependent, then the orphan finalizer from the owner.
func TestOrphan(t *testing.T) {
	own := deleting(cm("ns", "own", "o1"), metav1.FinalizerOrphanDependents)
	d1 := cm("ns", "d1", "d1", owner("own", "o1", true))
	d2 := cm("ns", "d2", "d2", owner("own", "o1", false), owner("other", "x1", false))
	f := newFixture(t, own, d1, d2)
	f.add(own, d1, d2)
	f.client.ClearActions()
	if err := f.gc.attemptToOrphan(controllertest.LogContext(t), "o1"); err != nil {
		t.Fatalf("attemptToOrphan: %v", err)
	}
	got := map[string]string{}
	for _, a := range f.actionsOf("patch") {
		p := a.(clienttesting.PatchActionImpl)
		got[p.Name] = string(p.Patch)
	}
	for _, d := range []string{"d1", "d2"} {
		want := `{"metadata":{"uid":"` + d + `","ownerReferences":[{"$patch":"delete","uid":"o1"}]}}`
		if got[d] != want {
			t.Errorf("patch of %s %q, want %q", d, got[d], want)
		}
	}
	if got["own"] != `{"metadata":{"finalizers":null,"resourceVersion":"1"}}` {
		t.Errorf("owner patch %q, want the orphan finalizer removed", got["own"])
	}
}

// TestClusterScopedDependentOfNamespacedOwner: such a reference can never
// resolve; the item is left alone (KCM forgets it) rather than deleted.
func TestClusterScopedDependentOfNamespacedOwner(t *testing.T) {
	node := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "n",
			UID:             "n1",
			ResourceVersion: "1",
			OwnerReferences: []metav1.OwnerReference{owner("own", "o1", false)},
		},
	}
	f := newFixture(t, node)
	f.gc.processChange(testLog(t), &change{kind: added, gvk: node.GroupVersionKind(), obj: node})
	f.client.ClearActions()
	for _, uid := range []string{"o1", "n1"} {
		if err := f.gc.attemptToDelete(controllertest.LogContext(t), uid); err != nil {
			t.Errorf("attemptToDelete %s: %v", uid, err)
		}
	}
	if dels := f.actionsOf("delete"); len(dels) > 0 {
		t.Errorf("deleted %v", dels)
	}
}

// TestForegroundCycleUnblocks: an item whose owner waits for its
// dependents, and one of whose own dependents waits for its dependents
// too, first stops blocking its owners (to break the cycle), then is
// deleted in the foreground.
func TestForegroundCycleUnblocks(t *testing.T) {
	own := deleting(cm("ns", "own", "o1"), metav1.FinalizerDeleteDependents)
	item := cm("ns", "item", "i1", owner("own", "o1", true))
	dep := deleting(
		cm("ns", "dep", "d1", owner("item", "i1", true)),
		metav1.FinalizerDeleteDependents,
	)
	f := newFixture(t, own, item, dep)
	f.add(own, item, dep)
	f.client.ClearActions()
	if err := f.gc.attemptToDelete(controllertest.LogContext(t), "i1"); err != nil {
		t.Fatalf("attemptToDelete: %v", err)
	}
	patches := f.actionsOf("patch")
	if len(patches) != 1 {
		t.Fatalf("patches %v, want the unblocking one", patches)
	}
	p := patches[0].(clienttesting.PatchActionImpl)
	if want := `{"metadata":{"uid":"i1","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"own","uid":"o1","blockOwnerDeletion":false}]}}`; string(
		p.Patch,
	) != want {
		t.Errorf("unblocking patch %s, want %s", p.Patch, want)
	}
	dels := f.actionsOf("delete")
	if len(dels) != 1 ||
		*dels[0].(clienttesting.DeleteActionImpl).DeleteOptions.PropagationPolicy != metav1.DeletePropagationForeground {
		t.Errorf("deletes %v, want one in the foreground", dels)
	}
}
