package disruption

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// summary renders a status as "healthy/desired/expected/allowed
// [disrupted pods] condition-status/reason".
func summary(st policyv1.PodDisruptionBudgetStatus) string {
	cond := meta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
	c := "none"
	if cond != nil {
		c = string(cond.Status) + "/" + cond.Reason
	}
	return fmt.Sprintf("%d/%d/%d/%d %v %s", st.CurrentHealthy, st.DesiredHealthy,
		st.ExpectedPods, st.DisruptionsAllowed, slices.Sorted(maps.Keys(st.DisruptedPods)), c)
}

func widgetScale(name string, uid string, replicas int32) func(k8stesting.Action) (bool,
	runtime.Object, error) {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		g := a.(k8stesting.GetAction)
		if g.GetName() != name {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{
				Group: "example.com", Resource: "widgets"}, g.GetName())
		}
		return true, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: typesUID(uid)},
			Spec:       autoscalingv1.ScaleSpec{Replicas: replicas}}, nil
	}
}

func TestSyncStatus(t *testing.T) {
	deployRef := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment",
		Name: "d", UID: "uid-d", Controller: new(true)}
	ghostRef := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment",
		Name: "ghost", UID: "uid-ghost", Controller: new(true)}
	inRS := ownedBy("apps/v1", "ReplicaSet", "rs", "uid-rs")
	widget := ownedBy("example.com/v1", "Widget", "w", "uid-w")
	withDisrupted := func(p *policyv1.PodDisruptionBudget,
		entries map[string]metav1.Time) *policyv1.PodDisruptionBudget {
		p.Status.DisruptedPods = entries
		return p
	}
	tests := []struct {
		name    string
		pdb     *policyv1.PodDisruptionBudget
		objs    []runtime.Object
		scale   func(k8stesting.Action) (bool, runtime.Object, error)
		want    string // the status written; "" for none
		events  []string
		recheck time.Duration
	}{
		{name: "integer minAvailable counts selected pods; not ready and deleting are not healthy",
			pdb: budget(intOr(2), nil),
			objs: []runtime.Object{newPod("a"), newPod("b"), newPod("c"),
				newPod("d", notReady), newPod("e", deleting)},
			want: "3/2/5/1 [] True/SufficientPods"},
		{name: "percent minAvailable of a ReplicaSet's scale, rounded up",
			pdb: budget(pct("50%"), nil),
			objs: []runtime.Object{replicaSet("rs", 5, nil), newPod("a", inRS),
				newPod("b", inRS), newPod("c", inRS, notReady)},
			want: "2/3/5/0 [] False/InsufficientPods"},
		{name: "maxUnavailable over a Deployment through its ReplicaSet",
			pdb: budget(nil, intOr(1)),
			objs: []runtime.Object{deployment("d", 3), replicaSet("rs", 7, deployRef),
				newPod("a", inRS), newPod("b", inRS), newPod("c", inRS)},
			want: "3/2/3/1 [] True/SufficientPods"},
		{name: "maxUnavailable percent over a StatefulSet",
			pdb: budget(nil, pct("34%")),
			objs: []runtime.Object{statefulSet("s", 3),
				newPod("a", ownedBy("apps/v1", "StatefulSet", "s", "uid-s")),
				newPod("b", ownedBy("apps/v1", "StatefulSet", "s", "uid-s"))},
			want: "2/1/3/1 [] True/SufficientPods"},
		{name: "maxUnavailable over a ReplicationController; desired never below 0",
			pdb: budget(nil, intOr(5)),
			objs: []runtime.Object{replicationController("rc", 2),
				newPod("a", ownedBy("v1", "ReplicationController", "rc", "uid-rc"))},
			want: "1/0/2/1 [] True/SufficientPods"},
		{name: "a custom controller through its scale subresource",
			pdb:   budget(nil, intOr(1)),
			objs:  []runtime.Object{newPod("a", widget), newPod("b", widget)},
			scale: widgetScale("w", "uid-w", 4),
			want:  "2/3/4/0 [] False/InsufficientPods"},
		{name: "a ReplicaSet whose Deployment is gone is read through its scale, as in KCM",
			pdb: budget(nil, intOr(1)),
			objs: []runtime.Object{replicaSet("rs", 2, ghostRef), newPod("a", inRS),
				newPod("b", inRS)},
			scale: func(a k8stesting.Action) (bool, runtime.Object, error) {
				if gr := a.GetResource().GroupResource(); gr.String() != "replicasets.apps" {
					return true, nil, apierrors.NewNotFound(gr, "rs")
				}
				return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{UID: "uid-rs"},
					Spec: autoscalingv1.ScaleSpec{Replicas: 2}}, nil
			},
			want: "2/1/2/1 [] True/SufficientPods"},
		{name: "a gone custom controller: the fail-safe status",
			pdb:   budget(nil, intOr(1)),
			objs:  []runtime.Object{newPod("a", widget)},
			scale: widgetScale("other", "", 1),
			want:  "0/0/0/0 [] False/SyncFailed",
			events: []string{"Warning CalculateExpectedPodCountFailed Failed to calculate the " +
				"number of expected pods: found no controllers for pod \"a\""}},
		{name: "a kind without a scale subresource: the fail-safe status naming it",
			pdb:   budget(pct("10%"), nil),
			objs:  []runtime.Object{newPod("a", ownedBy("example.com/v1", "Gadget", "g", "u"))},
			scale: widgetScale("other", "", 1),
			want:  "0/0/0/0 [] False/SyncFailed",
			events: []string{"Warning CalculateExpectedPodCountFailed Failed to calculate the " +
				"number of expected pods: gadgets.example.com does not implement the scale " +
				"subresource"}},
		{name: "unmanaged pods: nothing expected, a warning",
			pdb:    budget(nil, intOr(1)),
			objs:   []runtime.Object{newPod("a"), newPod("b")},
			want:   "2/0/0/0 [] False/InsufficientPods",
			events: []string{"Warning UnmanagedPods Pods selected by this PodDisruptionBudget"}},
		{name: "no pods",
			pdb:    budget(intOr(1), nil),
			want:   "0/1/0/0 [] False/InsufficientPods",
			events: []string{"Normal NoPods No matching pods found"}},
		{name: "disruptedPods: a recent entry is kept and not healthy, the recheck at its expiry",
			pdb: withDisrupted(budget(intOr(1), nil), map[string]metav1.Time{
				"a": at(-30 * time.Second), "b": at(-90 * time.Second)}),
			objs:    []runtime.Object{newPod("a"), newPod("b"), newPod("c")},
			want:    "1/1/3/0 [a b] False/InsufficientPods",
			recheck: 30 * time.Second},
		{name: "disruptedPods: expired, gone and deleting entries are dropped",
			pdb: withDisrupted(budget(intOr(1), nil), map[string]metav1.Time{
				"a": at(-3 * time.Minute), "gone": at(-time.Second), "c": at(-time.Second)}),
			objs: []runtime.Object{newPod("a"), newPod("b"), newPod("c", deleting)},
			want: "2/1/3/1 [] True/SufficientPods",
			events: []string{"Warning NotDeleted Pod was expected by PDB default/default " +
				"to be deleted but it wasn't"}},
		{name: "an invalid selector: the fail-safe status",
			pdb: func() *policyv1.PodDisruptionBudget {
				p := budget(intOr(1), nil)
				p.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{
					{Key: "x", Operator: "Bogus"}}
				return p
			}(),
			want:   "0/0/0/0 [] False/SyncFailed",
			events: []string{"Warning NoPods Failed to get pods: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, append(tt.objs, tt.pdb)...)
			if tt.scale != nil {
				f.scales.AddReactor("get", "*", tt.scale)
			}
			if err := f.c.sync(t.Context(), ns+"/pdb"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			written := f.statuses()
			var got string
			if len(written) > 0 {
				got = summary(written[len(written)-1])
			}
			if got != tt.want || len(written) > 1 {
				t.Errorf("wrote %d statuses, the last %q; want one, %q", len(written), got, tt.want)
			}
			events := f.events()
			for _, want := range tt.events {
				if !controllertest.HasEvent(events, want) {
					t.Errorf("events %q lack %q", events, want)
				}
			}
			if len(events) != len(tt.events) {
				t.Errorf("events %q, want %d", events, len(tt.events))
			}
			var wantRechecks controllertest.Requeues
			if tt.recheck > 0 {
				wantRechecks = controllertest.Requeues{{Key: ns + "/pdb", After: tt.recheck}}
			}
			if !slices.Equal(f.rechecks, wantRechecks) {
				t.Errorf("rechecks %v, want %v", f.rechecks, wantRechecks)
			}
		})
	}
}

// TestStatusWritten checks the written status's details once: the
// observed generation, the condition's generation and transition time.
func TestStatusWritten(t *testing.T) {
	pdb := budget(intOr(1), nil)
	pdb.Generation = 4
	pdb.Status.Conditions = []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition,
		Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason,
		LastTransitionTime: at(-time.Hour), ObservedGeneration: 2}}
	f := newFixture(t, pdb, newPod("a"), newPod("b"))
	if err := f.c.sync(t.Context(), ns+"/pdb"); err != nil {
		t.Fatal(err)
	}
	st := f.statuses()[0]
	cond := st.Conditions[0]
	if st.ObservedGeneration != 4 || cond.ObservedGeneration != 4 ||
		!cond.LastTransitionTime.Equal(ptrTime(at(-time.Hour))) || len(st.Conditions) != 1 {
		t.Errorf("status %+v: want observedGeneration 4, the condition's kept transition time", st)
	}
	// The same status again: nothing written.
	f = newFixture(t, withStatus(pdb, st), newPod("a"), newPod("b"))
	if err := f.c.sync(t.Context(), ns+"/pdb"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.statuses()); n != 0 {
		t.Errorf("an up-to-date budget was written %d times", n)
	}
	// A flip to False takes the clock's time.
	f = newFixture(t, withStatus(pdb, st), newPod("a"), newPod("b", notReady))
	if err := f.c.sync(t.Context(), ns+"/pdb"); err != nil {
		t.Fatal(err)
	}
	cond = f.statuses()[0].Conditions[0]
	if cond.Status != metav1.ConditionFalse || !cond.LastTransitionTime.Equal(ptrTime(at(0))) {
		t.Errorf("condition %+v: want False at the clock's now", cond)
	}
}

func withStatus(p *policyv1.PodDisruptionBudget,
	st policyv1.PodDisruptionBudgetStatus) *policyv1.PodDisruptionBudget {
	p = p.DeepCopy()
	p.Status = st
	return p
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

func TestSyncWriteFailures(t *testing.T) {
	tests := []struct {
		name       string
		errs       []error // answers to the status updates, in order
		wantErr    bool
		wantWrites []string // the conditions' reasons written
	}{
		{name: "a conflict is retried, no fail-safe",
			errs:    []error{apierrors.NewConflict(schema.GroupResource{}, "pdb", errors.New("x"))},
			wantErr: true, wantWrites: []string{"SufficientPods"}},
		{name: "another failure writes the fail-safe status, then is done (KCM)",
			errs:       []error{apierrors.NewInternalError(errors.New("boom")), nil},
			wantWrites: []string{"SufficientPods", "SyncFailed"}},
		{name: "a failing fail-safe is retried",
			errs: []error{apierrors.NewInternalError(errors.New("boom")),
				apierrors.NewInternalError(errors.New("boom"))},
			wantErr: true, wantWrites: []string{"SufficientPods", "SyncFailed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, budget(intOr(1), nil), newPod("a"), newPod("b"))
			n := 0
			f.client.PrependReactor("update", "poddisruptionbudgets",
				func(k8stesting.Action) (bool, runtime.Object, error) {
					n++
					if n <= len(tt.errs) && tt.errs[n-1] != nil {
						return true, nil, tt.errs[n-1]
					}
					return false, nil, nil
				})
			err := f.c.sync(t.Context(), ns+"/pdb")
			if (err != nil) != tt.wantErr {
				t.Errorf("sync = %v, want error %v", err, tt.wantErr)
			}
			var reasons []string
			for _, st := range f.statuses() {
				reasons = append(reasons, st.Conditions[0].Reason)
			}
			if !slices.Equal(reasons, tt.wantWrites) {
				t.Errorf("wrote %q, want %q", reasons, tt.wantWrites)
			}
			if ws := f.statuses(); len(ws) == 2 && (ws[1].DisruptionsAllowed != 0 ||
				!strings.Contains(ws[1].Conditions[0].Message, "boom")) {
				t.Errorf("fail-safe status %+v: want 0 allowed, the error as message", ws[1])
			}
		})
	}
}

func TestSyncOfAGoneBudget(t *testing.T) {
	f := newFixture(t)
	if err := f.c.sync(t.Context(), ns+"/gone"); err != nil || len(f.client.Actions()) != 0 {
		t.Errorf("sync = %v with %d actions, want nil and none", err, len(f.client.Actions()))
	}
}

func TestPodEvents(t *testing.T) {
	other := budget(intOr(1), nil)
	other.Name = "other"
	f := newFixture(t, budget(intOr(1), nil), other)
	f.c.addPod(newPod("a"))
	if f.c.loop.Len() != 1 {
		t.Errorf("%d keys queued, want the one budget KCM picks", f.c.loop.Len())
	}
	if !controllertest.HasEvent(f.events(), "Warning MultiplePodDisruptionBudgets") {
		t.Errorf("events %q: want MultiplePodDisruptionBudgets", f.events())
	}
	f = newFixture(t, budget(intOr(1), nil))
	unlabelled := newPod("x")
	unlabelled.Labels = nil
	f.c.addPod(unlabelled)
	f.c.deletePod(newPod("a"))
	if f.c.loop.Len() != 1 {
		t.Errorf("%d keys queued, want the budget once (the unlabelled pod matches none)",
			f.c.loop.Len())
	}
}
