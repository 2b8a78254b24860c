package podgroupprotection

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

const other = "example.com/other"

func group(name string, deleting bool, finalizers ...string) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, Finalizers: finalizers}}
	if deleting {
		now := metav1.Now()
		pg.DeletionTimestamp = &now
	}
	return pg
}

// member is a pod in namespace ns naming the PodGroup pg ("": none).
func member(ns, name, pg string, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name)},
		Spec: corev1.PodSpec{NodeName: "node-a",
			Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		Status: corev1.PodStatus{Phase: phase, PodIP: "10.0.0.1"},
	}
	if pg != "" {
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(pg)}
	}
	return p
}

// podIndexer holds pods as the host's informer would: pruned to the
// declared reads, indexed by the controller's index.
func podIndexer(t *testing.T, pods ...*corev1.Pod) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers())
	for _, p := range controllertest.Pruned(t, Descriptor(NewOptions()), pods...) {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

func TestSync(t *testing.T) {
	tests := []struct {
		name string
		pg   *schedulingv1beta1.PodGroup
		pods []*corev1.Pod
		want []string // the finalizers written; nil: nothing written
	}{
		{"not deleted: nothing (admission adds the finalizer, not the controller)",
			group("g", false), nil, nil},
		{"not deleted, with it: nothing", group("g", false, Finalizer), nil, nil},
		{"deleted without it: nothing", group("g", true, other), nil, nil},
		{"deleted, no pod: removed", group("g", true, other, Finalizer), nil,
			[]string{other}},
		{"deleted, a running pod names it: kept", group("g", true, Finalizer),
			[]*corev1.Pod{member("ns", "p", "g", corev1.PodRunning)}, nil},
		{"deleted, a pending pod names it: kept", group("g", true, Finalizer),
			[]*corev1.Pod{member("ns", "p", "g", corev1.PodPending)}, nil},
		{"deleted, a pod being deleted names it: kept", group("g", true, Finalizer),
			[]*corev1.Pod{func() *corev1.Pod {
				p := member("ns", "p", "g", corev1.PodRunning)
				p.DeletionTimestamp = ptr.To(metav1.Now())
				return p
			}()}, nil},
		{"deleted, only terminated pods name it: removed", group("g", true, Finalizer),
			[]*corev1.Pod{member("ns", "a", "g", corev1.PodSucceeded),
				member("ns", "b", "g", corev1.PodFailed)},
			[]string{}},
		{"deleted, pods of other groups and namespaces: removed",
			group("g", true, Finalizer, other, Finalizer),
			[]*corev1.Pod{member("ns", "a", "h", corev1.PodRunning),
				member("ns2", "b", "g", corev1.PodRunning),
				member("ns", "c", "", corev1.PodRunning)},
			[]string{other}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.pg.DeepCopy())
			client.ClearActions()
			c := &controller{client: client,
				groups: schedulinglisters.NewPodGroupLister(
					controllertest.NamespacedIndexer(t, tt.pg)),
				pods: podIndexer(t, tt.pods...)}
			if err := c.sync(controllertest.LogContext(t), "ns/g"); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range client.Actions() {
				u, ok := a.(k8stesting.UpdateAction)
				if !ok || a.GetVerb() != "update" || a.GetSubresource() != "" {
					t.Errorf("unexpected %s %s", a.GetVerb(), a.GetSubresource())
					continue
				}
				got = append([]string{},
					u.GetObject().(*schedulingv1beta1.PodGroup).Finalizers...)
			}
			if (got == nil) != (tt.want == nil) || !slices.Equal(got, tt.want) {
				t.Errorf("wrote finalizers %q, want %q (nil: no write)", got, tt.want)
			}
		})
	}
}

func TestSyncErrors(t *testing.T) {
	empty := &controller{
		groups: schedulinglisters.NewPodGroupLister(
			controllertest.NamespacedIndexer[*schedulingv1beta1.PodGroup](t)),
		pods: podIndexer(t)}
	if err := empty.sync(t.Context(), "ns/gone"); err != nil {
		t.Errorf("sync of a gone PodGroup = %v, want nil", err)
	}
	if err := empty.sync(t.Context(), "a/b/c"); err == nil {
		t.Error("sync of a malformed key: no error")
	}
	pg := group("g", true, Finalizer)
	client := fake.NewClientset(pg.DeepCopy())
	client.PrependReactor("update", "podgroups", func(k8stesting.Action) (bool,
		runtime.Object, error) {
		return true, nil, errors.New("conflict")
	})
	c := &controller{client: client,
		groups: schedulinglisters.NewPodGroupLister(controllertest.NamespacedIndexer(t, pg)),
		pods:   podIndexer(t)}
	if err := c.sync(t.Context(), "ns/g"); err == nil {
		t.Error("a failed update: no error (it would not be retried)")
	}
}

func TestWhatIsQueued(t *testing.T) {
	replaced := member("ns", "p", "old", corev1.PodRunning)
	replacement := member("ns", "p", "new", corev1.PodRunning)
	replacement.UID = "p2"
	tests := []struct {
		name     string
		old, obj any // old nil: an add; obj nil: a delete of old
		want     []string
	}{
		{"a running pod added: nothing", nil, member("ns", "p", "g", corev1.PodRunning), nil},
		{"a terminated pod added", nil, member("ns", "p", "g", corev1.PodSucceeded),
			[]string{"ns/g"}},
		{"a pod turned Failed", member("ns", "p", "g", corev1.PodRunning),
			member("ns", "p", "g", corev1.PodFailed), []string{"ns/g"}},
		{"a running pod updated: nothing", member("ns", "p", "g", corev1.PodPending),
			member("ns", "p", "g", corev1.PodRunning), nil},
		{"a pod replaced under its name: the old one's group", replaced, replacement,
			[]string{"ns/old"}},
		{"a terminated pod without a group: nothing", nil,
			member("ns", "p", "", corev1.PodFailed), nil},
		{"a pod deleted", member("ns", "p", "g", corev1.PodRunning), nil,
			[]string{"ns/g"}},
		{"a pod deleted, as a tombstone",
			cache.DeletedFinalStateUnknown{Key: "ns/p",
				Obj: member("ns", "p", "g", corev1.PodRunning)}, nil, []string{"ns/g"}},
		{"a pod without a group deleted: nothing", member("ns", "p", "", corev1.PodRunning),
			nil, nil},
		{"not a pod: nothing", nil, "junk", nil},
	}
	d := Descriptor(NewOptions())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			c := &controller{enqueue: func(key string) { got = append(got, key) }}
			old := controllertest.PrunedEvent(t, d, tt.old)
			obj := controllertest.PrunedEvent(t, d, tt.obj)
			switch {
			case obj == nil:
				c.podDeleted(old)
			default:
				c.podChanged(old, obj)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("queued %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOnlyDeletionCandidatesAreQueued(t *testing.T) {
	for _, tt := range []struct {
		pg   *schedulingv1beta1.PodGroup
		want bool
	}{
		{group("g", false), false},
		{group("g", false, Finalizer), false},
		{group("g", true, other), false},
		{group("g", true, other, Finalizer), true},
	} {
		if got := isDeletionCandidate(nil, tt.pg); got != tt.want {
			t.Errorf("isDeletionCandidate(%+v) = %v, want %v", tt.pg.ObjectMeta, got, tt.want)
		}
	}
	if isDeletionCandidate(nil, "junk") {
		t.Error("a non-PodGroup passed")
	}
}

func TestIndex(t *testing.T) {
	for _, tt := range []struct {
		obj  any
		want []string
	}{
		{member("ns", "p", "g", corev1.PodRunning), []string{"ns/g"}},
		{member("ns", "p", "g", corev1.PodPending), []string{"ns/g"}},
		{member("ns", "p", "g", corev1.PodSucceeded), nil},
		{member("ns", "p", "g", corev1.PodFailed), nil},
		{member("ns", "p", "", corev1.PodRunning), nil},
		{&corev1.Pod{Spec: corev1.PodSpec{SchedulingGroup: &corev1.PodSchedulingGroup{}}}, nil},
		{"junk", nil},
	} {
		got, err := activePodGroup(tt.obj)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("activePodGroup(%v) = %q, %v; want %q", tt.obj, got, err, tt.want)
		}
	}
}
