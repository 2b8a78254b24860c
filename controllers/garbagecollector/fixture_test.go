package garbagecollector

import (
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

var (
	configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")
)

// testMapper is a static mapper of a few core kinds that counts resets.
type testMapper struct {
	meta.RESTMapper
	resets int
}

func (m *testMapper) Reset() { m.resets++ }

func newTestMapper() *testMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion})
	for _, k := range []string{"ConfigMap", "Secret", "Pod", "Event"} {
		m.Add(corev1.SchemeGroupVersion.WithKind(k), meta.RESTScopeNamespace)
	}
	for _, k := range []string{"Node", "Namespace"} {
		m.Add(corev1.SchemeGroupVersion.WithKind(k), meta.RESTScopeRoot)
	}
	return &testMapper{RESTMapper: m}
}

// recordingQueue remembers what was queued, in order.
type recordingQueue struct{ keys []string }

func (q *recordingQueue) Add(key string)            { q.keys = append(q.keys, key) }
func (q *recordingQueue) AddRateLimited(key string) { q.keys = append(q.keys, key) }

func (q *recordingQueue) has(uid types.UID) bool { return slices.Contains(q.keys, string(uid)) }

// fixture is a collector over a fake metadata client whose graph the test
// feeds by hand, with queues that record.
type fixture struct {
	t        *testing.T
	gc       *collector
	client   *metadatafake.FakeMetadataClient
	mapper   *testMapper
	recorder *record.FakeRecorder
	deleted  *recordingQueue
	orphaned *recordingQueue
}

func newFixture(t *testing.T, live ...*metav1.PartialObjectMetadata) *fixture {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objs := make([]runtime.Object, 0, len(live))
	for _, o := range live {
		objs = append(objs, o.DeepCopy())
	}
	f := &fixture{
		t: t, client: metadatafake.NewSimpleMetadataClient(scheme, objs...), mapper: newTestMapper(),
		recorder: record.NewFakeRecorder(
			20,
		), deleted: &recordingQueue{}, orphaned: &recordingQueue{},
	}
	f.gc = newCollector("test", deps{
		metadata: f.client, mapper: f.mapper, recorder: f.recorder,
		ignored: defaultIgnoredResources(), workers: 1, syncPeriod: time.Second,
	})
	f.gc.toDelete.ShutDown()
	f.gc.toOrphan.ShutDown()
	t.Cleanup(f.gc.changes.ShutDown)
	f.gc.deleteQ, f.gc.orphanQ = f.deleted, f.orphaned
	// Patches succeed without applying (the fake tracker cannot apply a
	// strategic merge patch to metadata); tests inspect the patch sent.
	f.client.PrependReactor("patch", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &metav1.PartialObjectMetadata{}, nil
	})
	return f
}

// cm is a ConfigMap's metadata.
func cm(ns, name, uid string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ns,
			Name:            name,
			UID:             types.UID(uid),
			OwnerReferences: owners,
			ResourceVersion: "1",
		},
	}
}

// owner is an owner reference to a ConfigMap.
func owner(name, uid string, block bool) metav1.OwnerReference {
	r := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: types.UID(uid)}
	if block {
		r.BlockOwnerDeletion = &block
	}
	return r
}

// deleting marks o deleted with the given finalizers.
func deleting(o *metav1.PartialObjectMetadata, finalizers ...string) *metav1.PartialObjectMetadata {
	o = o.DeepCopy()
	now := metav1.Now()
	o.DeletionTimestamp = &now
	o.Finalizers = finalizers
	return o
}

var cmKind = corev1.SchemeGroupVersion.WithKind("ConfigMap")

// add folds an informer add of o into the graph.
func (f *fixture) add(objs ...*metav1.PartialObjectMetadata) {
	for _, o := range objs {
		f.gc.processChange(testLog(f.t), &change{kind: added, gvk: cmKind, obj: o})
	}
}

func (f *fixture) update(old, cur *metav1.PartialObjectMetadata) {
	f.gc.processChange(testLog(f.t), &change{kind: updated, gvk: cmKind, obj: cur, old: old})
}

func (f *fixture) remove(o *metav1.PartialObjectMetadata) {
	f.gc.processChange(testLog(f.t), &change{kind: deleted, gvk: cmKind, obj: o})
}

// fold folds the changes the workers queued (virtual deletes) into the
// graph.
func (f *fixture) fold() {
	for f.gc.changes.Len() > 0 {
		c, _ := f.gc.changes.Get()
		f.gc.processChange(testLog(f.t), c)
		f.gc.changes.Done(c)
	}
}

// node returns the graph's node for uid, failing the test without one.
func (f *fixture) node(uid string) *node {
	f.t.Helper()
	n, ok := f.gc.graph.get(types.UID(uid))
	if !ok {
		f.t.Fatalf("no node %s in the graph", uid)
	}
	return n
}

func (f *fixture) actionsOf(verb string) []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb {
			out = append(out, a)
		}
	}
	return out
}

func testLog(t *testing.T) logr.Logger { return testr.New(t) }
