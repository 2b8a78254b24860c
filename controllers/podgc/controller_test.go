package podgc

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type podOpt func(*corev1.Pod)

func newPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(t0), Generation: 3,
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func onNode(n string) podOpt          { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func age(d time.Duration) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(-d)) }
}
func evicted(p *corev1.Pod) { p.Status.Phase, p.Status.Reason = corev1.PodFailed, evictedReason }
func terminating(p *corev1.Pod) {
	ts := metav1.NewTime(t0)
	p.DeletionTimestamp = &ts
}

func newNode(name string, ready bool, taints ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
	for _, k := range taints {
		n.Spec.Taints = append(
			n.Spec.Taints,
			corev1.Taint{Key: k, Effect: corev1.TaintEffectNoExecute},
		)
	}
	return n
}

// fixture is a controller over listers filled directly (no informers, no
// goroutines) and a fake clientset.
type fixture struct {
	c      *controller
	client *fake.Clientset
	clock  *testingclock.FakeClock
	pods   cache.Indexer
	nodes  cache.Indexer
	orig   map[string]*corev1.Pod
}

// newFixture puts pods in the informer and the API, informerNodes in the
// informer and the API, and apiOnlyNodes in the API only.
func newFixture(
	t *testing.T,
	threshold int,
	pods []*corev1.Pod,
	informerNodes, apiOnlyNodes []*corev1.Node,
) *fixture {
	t.Helper()
	podIdx := controllertest.NamespacedIndexer(
		t,
		controllertest.Pruned(t, Descriptor(Options{}), pods...)...)
	nodeIdx := controllertest.ClusterIndexer(t, informerNodes...)
	orig := map[string]*corev1.Pod{}
	for _, p := range pods {
		orig[p.Name] = p.DeepCopy()
	}
	client := fake.NewClientset(slices.Concat(
		controllertest.DeepCopies(
			pods...),
		controllertest.DeepCopies(informerNodes...),
		controllertest.DeepCopies(apiOnlyNodes...),
	)...)
	clk := testingclock.NewFakeClock(t0)
	return &fixture{
		c: &controller{
			client:     client,
			pods:       corelisters.NewPodLister(podIdx),
			nodes:      corelisters.NewNodeLister(nodeIdx),
			threshold:  threshold,
			period:     defaultGCCheckPeriod,
			quarantine: DefaultQuarantineTime,
			clock:      clk,
			suspects:   map[string]time.Time{},
		},
		client: client,
		clock:  clk,
		pods:   podIdx,
		nodes:  nodeIdx,
		orig:   orig,
	}
}

// deletes returns the names of the deleted pods, sorted, and checks that
// each delete was forced and preconditioned on the pod's UID.
func (f *fixture) deletes(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, a := range f.client.Actions() {
		d, ok := a.(k8stesting.DeleteActionImpl)
		if !ok || d.Resource.Resource != "pods" {
			continue
		}
		out = append(out, d.Name)
		opts := d.DeleteOptions
		if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 {
			t.Errorf("delete of %s: grace period %v, want 0", d.Name, opts.GracePeriodSeconds)
		}
		if opts.Preconditions == nil || opts.Preconditions.UID == nil ||
			*opts.Preconditions.UID != types.UID("uid-"+d.Name) {
			t.Errorf(
				"delete of %s: preconditions %+v, want UID uid-%s",
				d.Name,
				opts.Preconditions,
				d.Name,
			)
		}
	}
	slices.Sort(out)
	return out
}

// patches returns, by pod name, the pods as the status patches make them:
// each patch applied to the pod's original.
func (f *fixture) patches(t *testing.T) map[string]corev1.Pod {
	t.Helper()
	out := map[string]corev1.Pod{}
	for _, a := range f.client.Actions() {
		p, ok := a.(k8stesting.PatchActionImpl)
		if !ok || p.Resource.Resource != "pods" {
			continue
		}
		if p.Subresource != "status" || p.PatchType != types.StrategicMergePatchType {
			t.Errorf(
				"patch of %s: subresource %q type %q, want a strategic merge patch of status",
				p.Name,
				p.Subresource,
				p.PatchType,
			)
		}
		before, err := json.Marshal(f.orig[p.Name])
		if err != nil {
			t.Fatal(err)
		}
		after, err := strategicpatch.StrategicMergePatch(before, p.Patch, corev1.Pod{})
		if err != nil {
			t.Fatalf("patch of %s: %v", p.Name, err)
		}
		var pod corev1.Pod
		if err := json.Unmarshal(after, &pod); err != nil {
			t.Fatalf("patch of %s: %v", p.Name, err)
		}
		var meta struct {
			Metadata struct {
				UID types.UID `json:"uid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(p.Patch, &meta); err != nil ||
			meta.Metadata.UID != types.UID("uid-"+p.Name) {
			t.Errorf("patch of %s: %s does not carry the UID precondition", p.Name, p.Patch)
		}
		out[p.Name] = pod
	}
	return out
}

func (f *fixture) nodeGets() int { return controllertest.CountActions(f.client, "get", "nodes") }

func TestGC(t *testing.T) {
	outOfService := corev1.TaintNodeOutOfService
	tests := []struct {
		name          string
		threshold     int
		pods          []*corev1.Pod
		nodes         []*corev1.Node
		wantDeleted   []string
		wantFailed    []string // patched to phase Failed, without a condition
		wantNodeGets  int
		wantNoActions bool
	}{
		{
			name:      "terminated pods above the threshold: evicted first, then oldest",
			threshold: 2,
			pods: []*corev1.Pod{
				newPod("old-succeeded", phase(corev1.PodSucceeded), age(3*time.Hour)),
				newPod("older-failed", phase(corev1.PodFailed), age(4*time.Hour)),
				newPod("new-evicted", evicted, age(time.Minute)),
				newPod("newest-failed", phase(corev1.PodFailed)),
				newPod("running-ancient", age(100*time.Hour)),
				newPod("pending-ancient", phase(corev1.PodPending), age(100*time.Hour)),
			},
			wantDeleted: []string{"new-evicted", "older-failed"},
		},
		{
			name:      "same creation time: name breaks the tie",
			threshold: 1,
			pods: []*corev1.Pod{
				newPod("b", phase(corev1.PodSucceeded)),
				newPod("a", phase(corev1.PodSucceeded)),
			},
			wantDeleted: []string{"a"},
		},
		{
			name:      "terminated pods at the threshold are kept",
			threshold: 2,
			pods: []*corev1.Pod{
				newPod("a", phase(corev1.PodSucceeded)),
				newPod("b", phase(corev1.PodFailed)),
			},
			wantNoActions: true,
		},
		{
			name:      "threshold 0 disables terminated-pod collection, as in KCM",
			threshold: 0,
			pods: []*corev1.Pod{
				newPod("a", phase(corev1.PodSucceeded)),
				newPod("b", phase(corev1.PodFailed)),
			},
			wantNoActions: true,
		},
		{
			name:          "negative threshold disables it too",
			threshold:     -1,
			pods:          []*corev1.Pod{newPod("a", phase(corev1.PodSucceeded))},
			wantNoActions: true,
		},
		{
			name:      "terminating pods on not-ready out-of-service nodes",
			threshold: 100,
			pods: []*corev1.Pod{
				newPod("oos", terminating, onNode("down-tainted")),
				newPod("oos-not-terminating", onNode("down-tainted")),
				newPod("ready-tainted", terminating, onNode("up-tainted")),
				newPod("down-untainted", terminating, onNode("down")),
			},
			nodes: []*corev1.Node{
				newNode("down-tainted", false, outOfService),
				newNode("up-tainted", true, outOfService),
				newNode("down", false, "other"),
			},
			wantDeleted: []string{"oos"},
			wantFailed:  []string{"oos"},
		},
		{
			name:      "unscheduled terminating pods",
			threshold: 100,
			pods: []*corev1.Pod{
				newPod("unscheduled-terminating", terminating, phase(corev1.PodPending)),
				newPod("unscheduled", phase(corev1.PodPending)),
				newPod("scheduled-terminating", terminating, onNode("n")),
			},
			nodes:       []*corev1.Node{newNode("n", true)},
			wantDeleted: []string{"unscheduled-terminating"},
			wantFailed:  []string{"unscheduled-terminating"},
		},
		{
			name:      "a terminal pod is deleted without a status patch",
			threshold: 100,
			pods:      []*corev1.Pod{newPod("done", terminating, phase(corev1.PodSucceeded))},
			// deleted as unscheduled terminating; no patch expected
			wantDeleted: []string{"done"},
		},
		{
			name:      "a pod eligible twice is deleted once",
			threshold: 1,
			pods: []*corev1.Pod{
				newPod("both", terminating, phase(corev1.PodFailed), age(time.Hour)),
				newPod("young", phase(corev1.PodFailed)),
			},
			wantDeleted: []string{"both"},
		},
		{
			name:         "pods of a node missing from the informer wait for the quarantine",
			threshold:    100,
			pods:         []*corev1.Pod{newPod("orphan", onNode("gone"))},
			wantNodeGets: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.threshold, tt.pods, tt.nodes, nil)
			f.c.gc(controllertest.LogContext(t))
			if tt.wantNoActions {
				if a := f.client.Actions(); len(a) != 0 {
					t.Fatalf("API calls %v, want none", a)
				}
				return
			}
			if got := f.deletes(t); !slices.Equal(got, tt.wantDeleted) {
				t.Errorf("deleted %v, want %v", got, tt.wantDeleted)
			}
			patches := f.patches(t)
			var failed []string
			for name, p := range patches {
				if p.Status.Phase != corev1.PodFailed {
					t.Errorf("patch of %s sets phase %q, want Failed", name, p.Status.Phase)
				}
				if p.Status.ObservedGeneration != 3 {
					t.Errorf(
						"patch of %s: observedGeneration %d, want the pod's generation 3",
						name,
						p.Status.ObservedGeneration,
					)
				}
				if len(p.Status.Conditions) != 0 {
					t.Errorf(
						"patch of %s sets conditions %+v, want none",
						name,
						p.Status.Conditions,
					)
				}
				failed = append(failed, name)
			}
			slices.Sort(failed)
			if !slices.Equal(failed, tt.wantFailed) {
				t.Errorf("patched to Failed: %v, want %v", failed, tt.wantFailed)
			}
			if got := f.nodeGets(); got != tt.wantNodeGets {
				t.Errorf("node GETs %d, want %d", got, tt.wantNodeGets)
			}
		})
	}
}

func TestOrphanedQuarantine(t *testing.T) {
	type step struct {
		advance      time.Duration
		addNode      bool // the node shows up in the informer before this pass
		wantNodeGets int  // cumulative
		wantDeleted  []string
	}
	tests := []struct {
		name     string
		pods     []*corev1.Pod
		apiNodes []*corev1.Node // in the API but not (yet) in the informer
		steps    []step
	}{
		{
			name: "node gone: pods deleted after the quarantine and a GET",
			pods: []*corev1.Pod{
				newPod("orphan", onNode("gone")),
				newPod("orphan-done", onNode("gone"), phase(corev1.PodSucceeded)),
				newPod("unbound", phase(corev1.PodPending)),
			},
			steps: []step{
				{advance: 0},
				{advance: 20 * time.Second},
				{advance: 19 * time.Second},
				{
					advance:      time.Second,
					wantNodeGets: 1,
					wantDeleted:  []string{"orphan", "orphan-done"},
				},
			},
		},
		{
			name:     "node only missing from the informer: GET finds it, quarantine restarts",
			pods:     []*corev1.Pod{newPod("p", onNode("late"))},
			apiNodes: []*corev1.Node{newNode("late", true)},
			steps: []step{
				{advance: 0},
				{advance: 40 * time.Second, wantNodeGets: 1},
				{advance: 20 * time.Second, wantNodeGets: 1},
				{advance: 20 * time.Second, wantNodeGets: 1},
				{advance: 20 * time.Second, wantNodeGets: 2},
			},
		},
		{
			name:     "node shows up in the informer during the quarantine",
			pods:     []*corev1.Pod{newPod("p", onNode("late"))},
			apiNodes: []*corev1.Node{newNode("late", true)},
			steps: []step{
				{advance: 0},
				{advance: 20 * time.Second, addNode: true},
				{advance: 40 * time.Second},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 100, tt.pods, nil, tt.apiNodes)
			ctx := controllertest.LogContext(t)
			for i, s := range tt.steps {
				f.clock.Step(s.advance)
				if s.addNode {
					for _, n := range tt.apiNodes {
						if err := f.nodes.Add(n); err != nil {
							t.Fatal(err)
						}
					}
				}
				f.c.gc(ctx)
				if got := f.nodeGets(); got != s.wantNodeGets {
					t.Errorf(
						"step %d (+%v): node GETs %d, want %d",
						i,
						s.advance,
						got,
						s.wantNodeGets,
					)
				}
				if got := f.deletes(t); !slices.Equal(got, s.wantDeleted) {
					t.Errorf("step %d (+%v): deleted %v, want %v", i, s.advance, got, s.wantDeleted)
				}
			}
		})
	}
}

func TestOrphanedPodGetsDisruptionCondition(t *testing.T) {
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	tests := []struct {
		name     string
		existing []corev1.PodCondition
		wantLTT  time.Time
	}{
		{"new condition", nil, t0.Add(40 * time.Second)},
		{"condition already true keeps its transition time", []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "Other", LastTransitionTime: earlier,
		}}, earlier.Time},
		{"condition false flips", []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse, LastTransitionTime: earlier,
		}}, t0.Add(40 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod("orphan", onNode("gone"))
			p.Status.Conditions = append(
				tt.existing,
				corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			)
			f := newFixture(t, 100, []*corev1.Pod{p}, nil, nil)
			ctx := controllertest.LogContext(t)
			f.c.gc(ctx)
			f.clock.Step(40 * time.Second)
			f.c.gc(ctx)
			patch, ok := f.patches(t)["orphan"]
			if !ok {
				t.Fatal("no status patch for the orphaned pod")
			}
			if patch.Status.Phase != corev1.PodFailed {
				t.Errorf("phase %q, want Failed", patch.Status.Phase)
			}
			if len(patch.Status.Conditions) != 2 {
				t.Errorf(
					"conditions after the patch %+v, want the Ready condition kept",
					patch.Status.Conditions,
				)
			}
			var got *corev1.PodCondition
			for i := range patch.Status.Conditions {
				if patch.Status.Conditions[i].Type == corev1.DisruptionTarget {
					got = &patch.Status.Conditions[i]
				}
			}
			if got == nil {
				t.Fatalf("no DisruptionTarget condition in %+v", patch.Status.Conditions)
			}
			if got.Status != corev1.ConditionTrue || got.Reason != orphanedReason ||
				got.Message != orphanedMessage ||
				got.ObservedGeneration != 3 {
				t.Errorf("condition %+v", got)
			}
			if !got.LastTransitionTime.Time.Equal(tt.wantLTT) {
				t.Errorf("lastTransitionTime %v, want %v", got.LastTransitionTime.Time, tt.wantLTT)
			}
			stored, err := f.client.Tracker().
				Get(corev1.SchemeGroupVersion.WithResource("pods"), "ns", "orphan")
			if err == nil {
				t.Errorf("pod still stored after the delete: %v", stored)
			}
			if p.Status.Phase != corev1.PodRunning ||
				len(p.Status.Conditions) != len(tt.existing)+1 {
				t.Error("the lister's pod was modified")
			}
		})
	}
}

func TestGCErrorsDoNotBlockOtherPods(t *testing.T) {
	tests := []struct {
		name        string
		verb        string
		subresource string
		err         error
		wantDeleted []string
	}{
		{"patch fails", "patch", "status", errors.New("boom"), []string{"b"}},
		{"delete fails", "delete", "", errors.New("boom"), []string{"a", "b"}},
		{"patch finds the pod gone", "patch", "status", nil, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 100, []*corev1.Pod{
				newPod("a", terminating),
				newPod("b", terminating),
			}, nil, nil)
			f.client.PrependReactor(
				tt.verb,
				"pods",
				func(a k8stesting.Action) (bool, runtime.Object, error) {
					if a.GetSubresource() != tt.subresource {
						return false, nil, nil
					}
					name := ""
					switch a := a.(type) {
					case k8stesting.PatchActionImpl:
						name = a.Name
					case k8stesting.DeleteActionImpl:
						name = a.Name
					}
					if name != "a" {
						return false, nil, nil
					}
					if tt.err == nil {
						return true, nil, newNotFound(name)
					}
					return true, nil, tt.err
				},
			)
			f.c.gc(controllertest.LogContext(t))
			if got := f.deletes(t); !slices.Equal(got, tt.wantDeleted) {
				t.Errorf("delete calls %v, want %v", got, tt.wantDeleted)
			}
		})
	}
}

func newNotFound(name string) error { return apierrors.NewNotFound(corev1.Resource("pods"), name) }
