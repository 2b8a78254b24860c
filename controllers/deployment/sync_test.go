package deployment

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podtemplate"
)

// updated returns d with its template changed to image and its
// generation bumped, as a user's edit would leave it.
func updated(d *appsv1.Deployment, image string) *appsv1.Deployment {
	d = d.DeepCopy()
	d.Spec.Template = webTemplate(image)
	d.Generation++
	return d
}

// TestRollingUpdateSteps: the ReplicaSet sizes (old/new) after each sync of
// a template change from v1 to v2, the ReplicaSet controller making every
// pod available between syncs; a last sync changes nothing.
func TestRollingUpdateSteps(t *testing.T) {
	tests := []struct {
		name           string
		replicas       int32
		surge, unavail intstr.IntOrString
		newAvailable   bool
		want           []string
	}{
		{"surge 1, unavailable 0", 3, intstr.FromInt32(1), intstr.FromInt32(0), true,
			[]string{"3/1", "2/1", "2/2", "1/2", "1/3", "0/3"}},
		{"surge 0, unavailable 1", 3, intstr.FromInt32(0), intstr.FromInt32(1), true,
			[]string{"2/0", "2/1", "1/1", "1/2", "0/2", "0/3"}},
		{"25% and 25% of 4", 4, intstr.FromString("25%"), intstr.FromString("25%"), true,
			[]string{"3/1", "3/2", "1/2", "1/4", "0/4"}},
		{
			"both round to zero: one unavailable",
			2,
			intstr.FromInt32(0),
			intstr.FromString("40%"),
			true,
			[]string{"1/0", "1/1", "0/1", "0/2"},
		},
		{"surge 2 of 3 (int), unavailable 0", 3, intstr.FromInt32(2), intstr.FromInt32(0), true,
			[]string{"3/2", "1/2", "1/3", "0/3"}},
		{"new pods never available: stalls", 3, intstr.FromInt32(1), intstr.FromInt32(0), false,
			[]string{"3/1", "3/1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v1 := rolling(tt.replicas, tt.surge, tt.unavail)
			old := ownedRS(v1, "v1", tt.replicas, 1, 0)
			d := updated(v1, "v2")
			d.Annotations = map[string]string{annotationRevision: "1"}
			f := newFixture(t, d, old)
			avail := func(rs *appsv1.ReplicaSet) bool { return tt.newAvailable || rs.Name == old.Name }
			var got []string
			for range tt.want {
				f.mustSync("web")
				got = append(got, f.sizes())
				f.runReplicaSets(avail)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("sizes after each sync %v, want %v", got, tt.want)
			}
			before := f.sizes()
			f.mustSync("web")
			if f.sizes() != before {
				t.Errorf("a further sync changed the sizes from %s to %s", before, f.sizes())
			}
		})
	}
}

// TestRolloutEndState: after a rolling update the new ReplicaSet has
// revision 2, the old one 1; the status and conditions say complete; the
// events are KCM's, with its wording.
func TestRolloutEndState(t *testing.T) {
	v1 := rolling(3, intstr.FromInt32(1), intstr.FromInt32(0))
	old := ownedRS(v1, "v1", 3, 1, 0)
	d := updated(v1, "v2")
	d.Annotations = map[string]string{annotationRevision: "1", "team": "blue"}
	f := newFixture(t, d, old)
	for range 8 {
		f.mustSync("web")
		f.runReplicaSets(nil)
	}
	f.mustSync("web")
	tmpl := webTemplate("v2")
	newName := "web-" + podtemplate.Hash(&tmpl, nil)
	rss := f.replicaSets()
	if len(rss) != 2 || rss[1].Name != newName {
		t.Fatalf("replica sets %v, want the old one and %s", f.sizes(), newName)
	}
	n := rss[1]
	if n.Annotations[annotationRevision] != "2" || rss[0].Annotations[annotationRevision] != "1" ||
		n.Annotations["team"] != "blue" {
		t.Errorf("annotations: new %v, old %v", n.Annotations, rss[0].Annotations)
	}
	if n.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != strings.TrimPrefix(newName, "web-") ||
		n.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] != strings.TrimPrefix(
			newName,
			"web-",
		) {
		t.Errorf(
			"pod-template-hash missing from labels %v or selector %v",
			n.Labels,
			n.Spec.Selector,
		)
	}
	got := f.deployment("web")
	st := got.Status
	if got.Annotations[annotationRevision] != "2" || st.Replicas != 3 || st.UpdatedReplicas != 3 || st.AvailableReplicas != 3 ||
		st.ReadyReplicas != 3 ||
		st.UnavailableReplicas != 0 ||
		ptr.Deref(st.TerminatingReplicas, -1) != 0 ||
		st.ObservedGeneration != 2 {
		t.Errorf("deployment revision %q status %+v", got.Annotations[annotationRevision], st)
	}
	if c := condition(got, appsv1.DeploymentProgressing); c != "True NewReplicaSetAvailable" {
		t.Errorf("Progressing %s", c)
	}
	if c := condition(got, appsv1.DeploymentAvailable); c != "True MinimumReplicasAvailable" {
		t.Errorf("Available %s", c)
	}
	want := []string{
		"Normal ScalingReplicaSet Scaled up replica set " + newName + " from 0 to 1",
		"Normal ScalingReplicaSet Scaled down replica set " + old.Name + " from 3 to 2",
		"Normal ScalingReplicaSet Scaled up replica set " + newName + " from 1 to 2",
		"Normal ScalingReplicaSet Scaled down replica set " + old.Name + " from 2 to 1",
		"Normal ScalingReplicaSet Scaled up replica set " + newName + " from 2 to 3",
		"Normal ScalingReplicaSet Scaled down replica set " + old.Name + " from 1 to 0",
	}
	if ev := f.events(); !slices.Equal(ev, want) {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(ev, "\n"), strings.Join(want, "\n"))
	}
}

// TestNewDeployment: the first sync creates <name>-<hash> at full size
// with revision 1 and the replica annotations, and says so in Progressing.
func TestNewDeployment(t *testing.T) {
	d := rolling(3, intstr.FromString("25%"), intstr.FromString("25%"))
	d.Annotations = map[string]string{"team": "blue", corev1.LastAppliedConfigAnnotation: "{}"}
	f := newFixture(t, d)
	f.mustSync("web")
	rss := f.replicaSets()
	tmpl := webTemplate("v1")
	name := "web-" + podtemplate.Hash(&tmpl, nil)
	if len(rss) != 1 || rss[0].Name != name || replicasOf(rss[0]) != 3 {
		t.Fatalf("replica sets %v (%s), want %s of 3", rss, f.sizes(), name)
	}
	wantAnn := map[string]string{
		"team":                    "blue",
		annotationRevision:        "1",
		annotationDesiredReplicas: "3",
		annotationMaxReplicas:     "4",
	}
	if fmt.Sprint(rss[0].Annotations) != fmt.Sprint(wantAnn) {
		t.Errorf("annotations %v, want %v", rss[0].Annotations, wantAnn)
	}
	if ref := metav1.GetControllerOf(rss[0]); ref == nil || ref.UID != d.UID ||
		ref.Kind != "Deployment" {
		t.Errorf("controller ref %v", ref)
	}
	got := f.deployment("web")
	if c := condition(got, appsv1.DeploymentProgressing); c != "True NewReplicaSetCreated" {
		t.Errorf("Progressing %s", c)
	}
	if c := condition(got, appsv1.DeploymentAvailable); c != "False MinimumReplicasUnavailable" {
		t.Errorf("Available %s", c)
	}
	if got.Annotations[annotationRevision] != "1" {
		t.Errorf("deployment revision %q", got.Annotations[annotationRevision])
	}
	if ev := f.events(); !slices.Equal(
		ev,
		[]string{"Normal ScalingReplicaSet Scaled up replica set " + name + " from 0 to 3"},
	) {
		t.Errorf("events %v", ev)
	}
	// Pods ready: complete.
	f.runReplicaSets(nil)
	f.mustSync("web")
	got = f.deployment("web")
	if c := condition(got, appsv1.DeploymentProgressing); c != "True NewReplicaSetAvailable" {
		t.Errorf("Progressing %s", c)
	}
	if c := condition(got, appsv1.DeploymentAvailable); c != "True MinimumReplicasAvailable" {
		t.Errorf("Available %s", c)
	}
}

// TestRecreateSteps: old ReplicaSets go to zero first; the new one is
// created only once no old pod is left running.
func TestRecreateSteps(t *testing.T) {
	v1 := recreate(3)
	old := ownedRS(v1, "v1", 3, 1, 0)
	d := updated(v1, "v2")
	oldPod := func(name string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: old.Labels,
				OwnerReferences: []metav1.OwnerReference{
					*metav1.NewControllerRef(old, appsv1.SchemeGroupVersion.WithKind("ReplicaSet")),
				}},
			Status: corev1.PodStatus{Phase: phase},
		}
	}
	f := newFixture(
		t,
		d,
		old,
		oldPod("p-running", corev1.PodRunning),
		oldPod("p-done", corev1.PodSucceeded),
	)
	steps := []struct {
		name   string
		before func()
		want   string
	}{
		{"old scaled to zero", nil, "0"},
		{"an old pod still runs: wait", func() { f.runReplicaSets(nil) }, "0"},
		{"still waiting", nil, "0"},
		{"old pod gone: new ReplicaSet at full size", func() {
			if err := f.client.CoreV1().Pods("ns").Delete(t.Context(), "p-running", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "0/3"},
		{"done", func() { f.runReplicaSets(nil) }, "0/3"},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		f.mustSync("web")
		if got := f.sizes(); got != s.want {
			t.Fatalf("%s: sizes %s, want %s", s.name, got, s.want)
		}
	}
	got := f.deployment("web")
	if c := condition(got, appsv1.DeploymentProgressing); c != "True NewReplicaSetAvailable" {
		t.Errorf("Progressing %s", c)
	}
	if got.Status.UpdatedReplicas != 3 || got.Status.AvailableReplicas != 3 {
		t.Errorf("status %+v", got.Status)
	}
}

// TestScaleDuringRollout: spec.replicas changed while two ReplicaSets are
// active is a scaling event: both are resized in proportion and get the new
// replica annotations; the rollout does not step.
func TestScaleDuringRollout(t *testing.T) {
	v1 := rolling(10, intstr.FromInt32(3), intstr.FromInt32(0))
	old := ownedRS(v1, "v1", 8, 1, 0)
	d := updated(v1, "v2")
	cur := ownedRS(d, "v2", 5, 2, 10)
	cur.Status.AvailableReplicas = 0
	d.Spec.Replicas = ptr.To[int32](15)
	d.Status.Replicas = 13
	f := newFixture(t, d, old, cur)
	f.mustSync("web")
	if got := f.sizes(); got != "11/7" {
		t.Fatalf("sizes %s, want 11/7", got)
	}
	for _, rs := range f.replicaSets() {
		if rs.Annotations[annotationDesiredReplicas] != "15" ||
			rs.Annotations[annotationMaxReplicas] != "18" {
			t.Errorf("%s annotations %v", rs.Name, rs.Annotations)
		}
	}
	want := []string{
		"Normal ScalingReplicaSet Scaled up replica set " + old.Name + " from 8 to 11",
		"Normal ScalingReplicaSet Scaled up replica set " + cur.Name + " from 5 to 7",
	}
	if ev := f.events(); !slices.Equal(ev, want) {
		t.Errorf("events %v, want %v", ev, want)
	}
}

// TestPaused: a paused Deployment gets Progressing Unknown
// DeploymentPaused, creates no ReplicaSet for a new template, but is still
// scaled; resuming records DeploymentResumed and the rollout proceeds.
func TestPaused(t *testing.T) {
	v1 := rolling(3, intstr.FromInt32(1), intstr.FromInt32(0))
	old := ownedRS(v1, "v1", 3, 1, 0)
	d := updated(v1, "v2")
	d.Spec.Paused = true
	d.Spec.Replicas = ptr.To[int32](5)
	f := newFixture(t, d, old)
	f.mustSync("web")
	if got := f.sizes(); got != "5" {
		t.Fatalf("sizes %s, want 5 (scaled, no new ReplicaSet)", got)
	}
	if c := condition(f.deployment("web"), appsv1.DeploymentProgressing); c != "Unknown DeploymentPaused" {
		t.Errorf("Progressing %s", c)
	}
	f.runReplicaSets(nil)
	resumed := f.deployment("web")
	resumed.Spec.Paused = false
	f.update(resumed)
	f.mustSync("web")
	got := f.deployment("web")
	if c := getCondition(got.Status, appsv1.DeploymentProgressing); c == nil ||
		c.Reason == reasonPaused {
		t.Fatalf("Progressing %v after resume", c)
	}
	if f.sizes() != "5/1" {
		t.Errorf("sizes %s after resume, want 5/1", f.sizes())
	}
	// The resumed condition was written before the rollout step.
	var reasons []string
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" &&
			a.GetResource().Resource == "deployments" {
			reasons = append(
				reasons,
				condition(u.GetObject().(*appsv1.Deployment), appsv1.DeploymentProgressing),
			)
		}
	}
	if !slices.Contains(reasons, "Unknown DeploymentResumed") {
		t.Errorf("status writes' Progressing %v, want one Unknown DeploymentResumed", reasons)
	}
}

// TestProgressDeadline: without progress for progressDeadlineSeconds the
// Progressing condition turns False ProgressDeadlineExceeded; before that,
// the Deployment is requeued for a second after the deadline.
func TestProgressDeadline(t *testing.T) {
	d := rolling(2, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](30)
	f := newFixture(t, d)
	f.mustSync("web")                                                // creates the ReplicaSet
	f.runReplicaSets(func(*appsv1.ReplicaSet) bool { return false }) // pods never ready
	f.mustSync("web")                                                // replicas appear: progress
	f.mustSync(
		"web",
	) // nothing new: requeued for the deadline
	c := getCondition(f.deployment("web").Status, appsv1.DeploymentProgressing)
	if c == nil || c.Reason != reasonReplicaSetUpdated {
		t.Fatalf("Progressing %v, want ReplicaSetUpdated", c)
	}
	want := c.LastUpdateTime.Add(31 * time.Second).Sub(f.clock.Now())
	if got := f.after["ns/web"]; got != want {
		t.Errorf("requeued after %v, want %v", got, want)
	}
	f.clock.Step(29500 * time.Millisecond)
	f.mustSync("web")
	if got := condition(f.deployment("web"), appsv1.DeploymentProgressing); got != "True ReplicaSetUpdated" {
		t.Errorf("before the deadline: %s", got)
	}
	if f.rateLimited["ns/web"] != 1 {
		t.Errorf(
			"a deadline under a second away is checked at once: %d rate-limited requeues",
			f.rateLimited["ns/web"],
		)
	}
	f.clock.Step(2 * time.Second)
	f.mustSync("web")
	if got := condition(f.deployment("web"), appsv1.DeploymentProgressing); got != "False ProgressDeadlineExceeded" {
		t.Errorf("after the deadline: %s", got)
	}
	if got := condition(f.deployment("web"), appsv1.DeploymentAvailable); got != "False MinimumReplicasUnavailable" {
		t.Errorf("Available %s", got)
	}
}

// TestReplicaFailure: a ReplicaFailure condition of the new ReplicaSet is
// carried over to the Deployment, and removed with it.
func TestReplicaFailure(t *testing.T) {
	d := rolling(2, intstr.FromInt32(1), intstr.FromInt32(0))
	rs := ownedRS(d, "v1", 2, 1, 0)
	rs.Status = appsv1.ReplicaSetStatus{Conditions: []appsv1.ReplicaSetCondition{{
		Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota",
	}}}
	f := newFixture(t, d, rs)
	f.mustSync("web")
	if got := condition(f.deployment("web"), appsv1.DeploymentReplicaFailure); got != "True FailedCreate" {
		t.Errorf("ReplicaFailure %s", got)
	}
	f.runReplicaSets(nil) // clears the RS's conditions
	f.mustSync("web")
	if got := condition(f.deployment("web"), appsv1.DeploymentReplicaFailure); got != "none" {
		t.Errorf("ReplicaFailure %s after the ReplicaSet recovered", got)
	}
}

// TestHistoryCleanup: beyond revisionHistoryLimit, the oldest old
// ReplicaSets that have no pods, want none and were observed by their
// controller are deleted, oldest revision first, once the rollout is
// complete.
func TestHistoryCleanup(t *testing.T) {
	tests := []struct {
		name  string
		limit int32
		// old ReplicaSets: image, revision, replicas
		olds []struct {
			image    string
			rev, n   int32
			unsynced bool
		}
		wantDeleted []string
	}{
		{"limit 1 of three", 1, []struct {
			image    string
			rev, n   int32
			unsynced bool
		}{{"a", 1, 0, false}, {"b", 2, 0, false}, {"c", 3, 0, false}}, []string{"a", "b"}},
		{"limit 0", 0, []struct {
			image    string
			rev, n   int32
			unsynced bool
		}{{"a", 1, 0, false}, {"b", 2, 0, false}}, []string{"a", "b"}},
		{"one with pods is kept", 1, []struct {
			image    string
			rev, n   int32
			unsynced bool
		}{{"a", 1, 1, false}, {"b", 2, 0, false}, {"c", 3, 0, false}}, []string{"b"}},
		{"one not yet observed is kept", 0, []struct {
			image    string
			rev, n   int32
			unsynced bool
		}{{"a", 1, 0, true}, {"b", 2, 0, false}}, []string{"b"}},
		{"revision order, not creation order", 1, []struct {
			image    string
			rev, n   int32
			unsynced bool
		}{{"a", 3, 0, false}, {"b", 1, 0, false}, {"c", 2, 0, false}}, []string{"b", "c"}},
		{"within the limit", 5, []struct {
			image    string
			rev, n   int32
			unsynced bool
		}{{"a", 1, 0, false}, {"b", 2, 0, false}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := rolling(2, intstr.FromInt32(1), intstr.FromInt32(0))
			d.Spec.RevisionHistoryLimit = ptr.To(tt.limit)
			objs := []runtime.Object{d}
			names := map[string]string{}
			for i, o := range tt.olds {
				rs := ownedRS(d, o.image, o.n, int(o.rev), i)
				if o.unsynced {
					rs.Generation = 2
					rs.Status.ObservedGeneration = 1
				}
				names[rs.Name] = o.image
				objs = append(objs, rs)
			}
			cur := ownedRS(d, "v1", 2, 9, 100)
			objs = append(objs, cur)
			f := newFixture(t, objs...)
			// One with pods left is scaled down first, which is not part of
			// this test: make the rollout complete by hand.
			dd := f.deployment("web")
			dd.Status = appsv1.DeploymentStatus{
				ObservedGeneration: 1,
				Replicas:           2,
				UpdatedReplicas:    2,
				AvailableReplicas:  2,
				ReadyReplicas:      2,
			}
			if _, err := f.client.AppsV1().Deployments("ns").UpdateStatus(t.Context(), dd, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			f.client.ClearActions()
			f.refresh()
			if err := f.c.cleanup(t.Context(), findOld(dd, f.c.mustList(t)), dd); err != nil {
				t.Fatal(err)
			}
			var deleted []string
			for _, a := range f.client.Actions() {
				if del, ok := a.(clienttesting.DeleteAction); ok {
					deleted = append(deleted, names[del.GetName()])
				}
			}
			if !slices.Equal(deleted, tt.wantDeleted) {
				t.Errorf("deleted %v, want %v", deleted, tt.wantDeleted)
			}
		})
	}
}

// mustList lists the cached ReplicaSets of ns.
func (c *controller) mustList(t *testing.T) []*appsv1.ReplicaSet {
	t.Helper()
	l, err := c.rsLister.ReplicaSets("ns").List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestHistoryCleanupInSync: a complete rollout with revisionHistoryLimit 1
// deletes all but the newest old ReplicaSet in the same sync that finds it
// complete.
func TestHistoryCleanupInSync(t *testing.T) {
	d := rolling(2, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	a, b := ownedRS(d, "a", 0, 1, 0), ownedRS(d, "b", 0, 2, 1)
	cur := ownedRS(d, "v1", 2, 3, 2)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: 1,
		Replicas:           2,
		UpdatedReplicas:    2,
		AvailableReplicas:  2,
		ReadyReplicas:      2,
	}
	f := newFixture(t, d, a, b, cur)
	f.mustSync("web")
	var left []string
	for _, rs := range f.replicaSets() {
		left = append(left, rs.Name)
	}
	if !slices.Equal(left, []string{b.Name, cur.Name}) {
		t.Errorf("left %v, want %v", left, []string{b.Name, cur.Name})
	}
}

// TestClaimReplicaSets: a matching orphan is adopted, an owned ReplicaSet
// that stopped matching is released, another owner's is left alone.
func TestClaimReplicaSets(t *testing.T) {
	d := rolling(2, intstr.FromInt32(1), intstr.FromInt32(0))
	mine := ownedRS(d, "v1", 2, 1, 0)
	orphan := ownedRS(d, "orphan", 0, 0, 1)
	orphan.OwnerReferences = nil
	strayed := ownedRS(d, "strayed", 0, 0, 2)
	strayed.Labels = map[string]string{"app": "other"}
	foreign := ownedRS(d, "foreign", 0, 0, 3)
	foreign.OwnerReferences[0].UID = "someone-else"
	f := newFixture(t, d, mine, orphan, strayed, foreign)
	got, err := f.c.claimReplicaSets(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rs := range got {
		names = append(names, rs.Name)
	}
	slices.Sort(names)
	want := []string{mine.Name, orphan.Name}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("claimed %v, want %v", names, want)
	}
	var patched []string
	for _, a := range f.client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok {
			patched = append(patched, p.GetName())
		}
	}
	slices.Sort(patched)
	wantPatched := []string{orphan.Name, strayed.Name}
	slices.Sort(wantPatched)
	if !slices.Equal(patched, wantPatched) {
		t.Errorf("patched %v, want %v (adopted and released)", patched, wantPatched)
	}
	if ref := metav1.GetControllerOf(mustGet(t, f, orphan.Name)); ref == nil || ref.UID != d.UID {
		t.Errorf("orphan's controller %v", ref)
	}
	if ref := metav1.GetControllerOf(mustGet(t, f, strayed.Name)); ref != nil {
		t.Errorf("released ReplicaSet still has controller %v", ref)
	}
}

func mustGet(t *testing.T, f *fixture, name string) *appsv1.ReplicaSet {
	t.Helper()
	rs, err := f.client.AppsV1().ReplicaSets("ns").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestAdoptedOrphanBecomesNewReplicaSet: an orphan with the Deployment's
// template (and no hash in its name) is adopted and used as the new
// ReplicaSet: it gets revision 1 and Progressing says FoundNewReplicaSet;
// no other ReplicaSet is created.
func TestAdoptedOrphanBecomesNewReplicaSet(t *testing.T) {
	d := rolling(3, intstr.FromInt32(1), intstr.FromInt32(0))
	orphan := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns",
			Name:      "web-orphan",
			UID:       "uid-orphan",
			Labels:    webLabels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: webLabels},
			Template: webTemplate("v1"),
		},
	}
	f := newFixture(t, d, orphan)
	for range 4 {
		f.mustSync("web")
		f.runReplicaSets(nil)
	}
	rss := f.replicaSets()
	if len(rss) != 1 || rss[0].Name != "web-orphan" || replicasOf(rss[0]) != 3 {
		t.Fatalf("replica sets %v sizes %s, want web-orphan of 3 alone", len(rss), f.sizes())
	}
	if rss[0].Annotations[annotationRevision] != "1" || metav1.GetControllerOf(rss[0]) == nil {
		t.Errorf("adopted ReplicaSet %v", rss[0].ObjectMeta)
	}
	var progressing []string
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" &&
			a.GetResource().Resource == "deployments" {
			if c := condition(u.GetObject().(*appsv1.Deployment), appsv1.DeploymentProgressing); c != "none" {
				progressing = append(progressing, c)
			}
		}
	}
	if len(progressing) == 0 || progressing[0] != "True FoundNewReplicaSet" {
		t.Errorf(
			"Progressing over the status writes %v, want FoundNewReplicaSet first",
			progressing,
		)
	}
	if got := condition(f.deployment("web"), appsv1.DeploymentProgressing); got != "True NewReplicaSetAvailable" {
		t.Errorf("Progressing %s", got)
	}
}

// TestHashCollision: the hashed name is taken by a ReplicaSet with another
// template: collisionCount goes up and the next sync uses another name.
func TestHashCollision(t *testing.T) {
	d := rolling(1, intstr.FromInt32(1), intstr.FromInt32(0))
	tmpl := webTemplate("v1")
	taken := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns",
			Name:      "web-" + podtemplate.Hash(&tmpl, nil),
			UID:       "uid-taken",
			Labels:    map[string]string{"app": "other"},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}},
			},
		},
	}
	f := newFixture(t, d, taken)
	err := f.sync("web")
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("sync error %v, want AlreadyExists", err)
	}
	if got := f.deployment("web").Status.CollisionCount; ptr.Deref(got, 0) != 1 {
		t.Fatalf("collisionCount %v, want 1", got)
	}
	f.mustSync("web")
	want := "web-" + podtemplate.Hash(&tmpl, ptr.To[int32](1))
	if _, err := f.client.AppsV1().ReplicaSets("ns").Get(t.Context(), want, metav1.GetOptions{}); err != nil {
		t.Errorf("ReplicaSet %s after the collision: %v", want, err)
	}
}

// TestSelectingAll: an empty selector is refused with KCM's event, and
// only observedGeneration is written.
func TestSelectingAll(t *testing.T) {
	d := rolling(1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Selector = &metav1.LabelSelector{}
	f := newFixture(t, d)
	f.mustSync("web")
	if ev := f.events(); !slices.Equal(
		ev,
		[]string{
			"Warning SelectingAll This deployment is selecting all pods. A non-empty selector is required.",
		},
	) {
		t.Errorf("events %v", ev)
	}
	if got := f.writes(); !slices.Equal(got, []string{"update deployments/status"}) {
		t.Errorf("writes %v", got)
	}
	if g := f.deployment("web").Status.ObservedGeneration; g != 1 {
		t.Errorf("observedGeneration %d", g)
	}
}

// TestCreateFailure: a failed create sets Progressing False
// ReplicaSetCreateError and records a Warning event.
func TestCreateFailure(t *testing.T) {
	d := rolling(1, intstr.FromInt32(1), intstr.FromInt32(0))
	f := newFixture(t, d)
	f.client.PrependReactor(
		"create",
		"replicasets",
		func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(
				schema.GroupResource{Group: "apps", Resource: "replicasets"},
				"x",
				fmt.Errorf("quota"),
			)
		},
	)
	if err := f.sync("web"); !apierrors.IsForbidden(err) {
		t.Fatalf("sync error %v", err)
	}
	if got := condition(f.deployment("web"), appsv1.DeploymentProgressing); got != "False ReplicaSetCreateError" {
		t.Errorf("Progressing %s", got)
	}
	ev := f.events()
	if len(ev) != 1 ||
		!strings.HasPrefix(
			ev[0],
			"Warning ReplicaSetCreateError Failed to create new replica set \"web-",
		) {
		t.Errorf("events %v", ev)
	}
}

// TestDeletedDeploymentStatusOnly: a Deployment being deleted gets its
// status updated and nothing else.
func TestDeletedDeploymentStatusOnly(t *testing.T) {
	d := rolling(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.DeletionTimestamp = ptr.To(metav1.NewTime(epoch))
	d.Finalizers = []string{"foregroundDeletion"}
	rs := ownedRS(d, "v0", 1, 1, 0)
	f := newFixture(t, d, rs)
	f.mustSync("web")
	if got := f.writes(); !slices.Equal(got, []string{"update deployments/status"}) {
		t.Errorf("writes %v", got)
	}
	if st := f.deployment("web").Status; st.Replicas != 1 || st.UpdatedReplicas != 0 {
		t.Errorf("status %+v", st)
	}
}

// TestRollbackAnnotation: the deprecated rollback annotation puts the
// template of the requested revision back and is removed.
func TestRollbackAnnotation(t *testing.T) {
	v1 := rolling(2, intstr.FromInt32(1), intstr.FromInt32(0))
	old := ownedRS(v1, "v1", 0, 1, 0)
	d := updated(v1, "v2")
	cur := ownedRS(d, "v2", 2, 2, 10)
	d.Annotations = map[string]string{appsv1.DeprecatedRollbackTo: "0", annotationRevision: "2"}
	f := newFixture(t, d, old, cur)
	f.mustSync("web")
	got := f.deployment("web")
	if _, ok := got.Annotations[appsv1.DeprecatedRollbackTo]; ok ||
		got.Spec.Template.Spec.Containers[0].Image != "v1" {
		t.Errorf(
			"annotations %v image %s",
			got.Annotations,
			got.Spec.Template.Spec.Containers[0].Image,
		)
	}
	if _, ok := got.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		t.Error("the hash label came back into the template")
	}
	if ev := f.events(); !slices.Equal(
		ev,
		[]string{`Normal DeploymentRollback Rolled back deployment "web" to revision 1`},
	) {
		t.Errorf("events %v", ev)
	}
}
