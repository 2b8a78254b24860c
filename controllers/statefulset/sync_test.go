package statefulset

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// TestOrderedReadyScaleUp: one pod per sync, each only once its
// predecessor runs ready; every pod has its identity, revision, claim and
// volume; the status counts them.
func TestOrderedReadyScaleUp(t *testing.T) {
	f := newFixture(t, []runtime.Object{newSet("web", 3)})
	f.mustSync("web")
	if got := f.podNames(); got != "web-0" {
		t.Fatalf("after the first sync: pods %q, want web-0", got)
	}
	f.mustSync("web")
	if got := f.podNames(); got != "web-0" {
		t.Fatalf("web-0 not ready, second sync: pods %q, want web-0", got)
	}
	f.settle("web", 10)
	if got := f.podNames(); got != "web-0 web-1 web-2" {
		t.Fatalf("pods %q", got)
	}
	revs := f.revisions()
	if len(revs) != 1 || revs[0].Revision != 1 || !strings.HasPrefix(revs[0].Name, "web-") {
		t.Fatalf("revisions %+v", revs)
	}
	for i, p := range f.apiPods() {
		wantLabels := map[string]string{
			"app":                           "web",
			appsv1.StatefulSetPodNameLabel:  p.Name,
			appsv1.PodIndexLabel:            string(rune('0' + i)),
			appsv1.StatefulSetRevisionLabel: revs[0].Name,
		}
		for k, v := range wantLabels {
			if p.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", p.Name, k, p.Labels[k], v)
			}
		}
		if p.Spec.Hostname != p.Name || p.Spec.Subdomain != "web" {
			t.Errorf("%s: hostname %q subdomain %q", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
		}
		if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].PersistentVolumeClaim == nil ||
			p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-"+p.Name {
			t.Errorf("%s: volumes %+v", p.Name, p.Spec.Volumes)
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "StatefulSet" ||
			ref.Name != "web" {
			t.Errorf("%s: controller %+v", p.Name, ref)
		}
	}
	var claims []string
	for _, c := range f.claims() {
		claims = append(claims, c.Name)
		if c.Labels["app"] != "web" || len(c.OwnerReferences) != 0 {
			t.Errorf("claim %s: labels %v owners %v", c.Name, c.Labels, c.OwnerReferences)
		}
	}
	if got := strings.Join(claims, " "); got != "data-web-0 data-web-1 data-web-2" {
		t.Errorf("claims %q", got)
	}
	st := f.set("web").Status
	want := appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3,
		AvailableReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 3,
		CurrentRevision: revs[0].Name, UpdateRevision: revs[0].Name,
		CollisionCount: ptr.To[int32](0)}
	if !equalStatus(st, want) {
		t.Errorf("status %+v, want %+v", st, want)
	}
	events := controllertest.Events(f.recorder)
	for _, e := range []string{
		"Normal SuccessfulCreate create Claim data-web-0 Pod web-0 in StatefulSet web success",
		"Normal SuccessfulCreate create Pod web-0 in StatefulSet web successful",
	} {
		if !slices.Contains(events, strings.Replace(e, "create", "Create", 1)) {
			t.Errorf("no event %q in %q", e, events)
		}
	}
}

func equalStatus(a, b appsv1.StatefulSetStatus) bool {
	return a.ObservedGeneration == b.ObservedGeneration && a.Replicas == b.Replicas &&
		a.ReadyReplicas == b.ReadyReplicas && a.AvailableReplicas == b.AvailableReplicas &&
		a.CurrentReplicas == b.CurrentReplicas && a.UpdatedReplicas == b.UpdatedReplicas &&
		a.CurrentRevision == b.CurrentRevision && a.UpdateRevision == b.UpdateRevision &&
		ptr.Deref(a.CollisionCount, -1) == ptr.Deref(b.CollisionCount, -1)
}

// TestScaleDown: OrderedReady deletes the highest ordinal first, one per
// sync; Parallel deletes every condemned pod in one sync. Ordinals start
// at spec.ordinals.start.
func TestScaleDown(t *testing.T) {
	tests := []struct {
		name     string
		policy   appsv1.PodManagementPolicyType
		start    int32
		steps    []string
		wantLast string
	}{
		{"ordered", appsv1.OrderedReadyPodManagement, 0,
			[]string{"web-0 web-1", "web-0"}, "web-0"},
		{"parallel", appsv1.ParallelPodManagement, 0, []string{"web-0"}, "web-0"},
		{"ordered from 5", appsv1.OrderedReadyPodManagement, 5,
			[]string{"web-5 web-6", "web-5"}, "web-5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, []runtime.Object{newSet("web", 3, func(s *appsv1.StatefulSet) {
				s.Spec.PodManagementPolicy = tt.policy
				if tt.start > 0 {
					s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: tt.start}
				}
			})})
			f.settle("web", 10)
			s := f.set("web")
			s.Spec.Replicas = ptr.To[int32](1)
			f.update(s)
			for _, want := range tt.steps {
				f.mustSync("web")
				if got := f.podNames(); got != want {
					t.Fatalf("pods %q, want %q", got, want)
				}
			}
			f.settle("web", 5)
			if got := f.podNames(); got != tt.wantLast {
				t.Errorf("pods %q, want %q", got, tt.wantLast)
			}
			if st := f.set("web").Status; st.Replicas != 1 || st.ReadyReplicas != 1 {
				t.Errorf("status %+v", st)
			}
			if n := len(f.claims()); n != 3 {
				t.Errorf("%d claims, want 3 (Retain)", n)
			}
		})
	}
}

// TestParallelCreatesAll: Parallel creates every pod in one sync.
func TestParallelCreatesAll(t *testing.T) {
	f := newFixture(t, []runtime.Object{newSet("web", 4, func(s *appsv1.StatefulSet) {
		s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	})})
	f.mustSync("web")
	if got := f.podNames(); got != "web-0 web-1 web-2 web-3" {
		t.Fatalf("pods %q", got)
	}
}

// TestOrderedWaitsForTerminating: a monotonic set does not delete web-1
// while web-2 is terminating, nor create past a terminating pod.
func TestOrderedWaitsForTerminating(t *testing.T) {
	f := newFixture(t, []runtime.Object{newSet("web", 3)})
	f.settle("web", 10)
	p := f.apiPods()[2]
	now := metav1.NewTime(f.clock.Now())
	p.DeletionTimestamp = &now
	if _, err := f.client.CoreV1().Pods("ns").Update(t.Context(), &p,
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := f.set("web")
	s.Spec.Replicas = ptr.To[int32](1)
	f.update(s)
	f.mustSync("web")
	if got := f.podNames(); got != "web-0 web-1 web-2" {
		t.Errorf("pods %q: web-1 deleted while web-2 terminates", got)
	}
}

// TestPartitionedRollingUpdate: with partition 1 a new template replaces
// the highest outdated pod first and never web-0; the status keeps the
// old currentRevision until the partition drops.
func TestPartitionedRollingUpdate(t *testing.T) {
	for _, gate := range []bool{true, false} {
		t.Run(map[bool]string{true: "maxUnavailable", false: "one at a time"}[gate],
			func(t *testing.T) {
				var opts []fixtureOption
				if !gate {
					opts = append(opts, withoutMaxUnavailable)
				}
				f := newFixture(t, []runtime.Object{newSet("web", 3,
					func(s *appsv1.StatefulSet) {
						s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](1)
					})}, opts...)
				f.settle("web", 10)
				old := f.set("web").Status.CurrentRevision
				s := f.set("web")
				s.Spec.Template.Annotations = map[string]string{"rollout": "2"}
				f.update(s)
				f.mustSync("web")
				if got := f.podNames(); got != "web-0 web-1" {
					t.Fatalf("pods %q: web-2 should go first", got)
				}
				f.settle("web", 10)
				st := f.set("web").Status
				if st.CurrentRevision != old || st.UpdateRevision == old ||
					st.UpdatedReplicas != 2 || st.CurrentReplicas != 1 {
					t.Fatalf("status %+v", st)
				}
				pods := f.apiPods()
				if podRevision(&pods[0]) != old || podRevision(&pods[1]) != st.UpdateRevision ||
					podRevision(&pods[2]) != st.UpdateRevision {
					t.Fatalf("revisions %s %s %s", podRevision(&pods[0]),
						podRevision(&pods[1]), podRevision(&pods[2]))
				}
				s = f.set("web")
				s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0)
				f.update(s)
				f.settle("web", 10)
				st = f.set("web").Status
				if st.CurrentRevision != st.UpdateRevision || st.CurrentReplicas != 3 ||
					st.UpdatedReplicas != 3 {
					t.Fatalf("status %+v", st)
				}
				if n := len(f.revisions()); n != 2 {
					t.Errorf("%d revisions, want 2", n)
				}
			})
	}
}

// TestMaxUnavailable: maxUnavailable 2 deletes two outdated pods at once.
func TestMaxUnavailable(t *testing.T) {
	f := newFixture(t, []runtime.Object{newSet("web", 3, func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	})})
	f.settle("web", 10)
	s := f.set("web")
	s.Spec.Template.Annotations = map[string]string{"rollout": "2"}
	f.update(s)
	f.mustSync("web")
	if got := f.podNames(); got != "web-0" {
		t.Fatalf("pods %q, want web-0 (two deleted)", got)
	}
}

// TestOnDelete: a new template deletes nothing; a deleted pod comes back
// at the new revision.
func TestOnDelete(t *testing.T) {
	f := newFixture(t, []runtime.Object{newSet("web", 2, func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{
			Type: appsv1.OnDeleteStatefulSetStrategyType}
	})})
	f.settle("web", 10)
	s := f.set("web")
	s.Spec.Template.Annotations = map[string]string{"rollout": "2"}
	f.update(s)
	f.settle("web", 5)
	st := f.set("web").Status
	if st.UpdatedReplicas != 0 || st.CurrentReplicas != 2 {
		t.Fatalf("status %+v: OnDelete replaced pods", st)
	}
	if err := f.client.CoreV1().Pods("ns").Delete(t.Context(), "web-1",
		metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.settle("web", 5)
	pods := f.apiPods()
	if podRevision(&pods[1]) != st.UpdateRevision || podRevision(&pods[0]) != st.CurrentRevision {
		t.Errorf("revisions %s %s", podRevision(&pods[0]), podRevision(&pods[1]))
	}
}

// TestRollbackRenumbers: going back to an earlier template reuses its
// revision under the next number; the history limit deletes the oldest
// unused revision.
func TestRollbackRenumbers(t *testing.T) {
	f := newFixture(t, []runtime.Object{newSet("web", 1, func(s *appsv1.StatefulSet) {
		s.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	})})
	f.settle("web", 10)
	first := f.revisions()[0].Name
	for _, v := range []string{"2", "3", ""} {
		s := f.set("web")
		s.Spec.Template.Annotations = nil
		if v != "" {
			s.Spec.Template.Annotations = map[string]string{"rollout": v}
		}
		f.update(s)
		f.settle("web", 10)
	}
	revs := f.revisions()
	if len(revs) != 2 {
		t.Fatalf("%d revisions, want 2 (limit 1 + current)", len(revs))
	}
	last := revs[len(revs)-1]
	if last.Name != first || last.Revision != 4 {
		t.Errorf("newest revision %s #%d, want %s #4", last.Name, last.Revision, first)
	}
	if st := f.set("web").Status; st.UpdateRevision != first || st.CurrentRevision != first {
		t.Errorf("status %+v", st)
	}
}

// TestRepairsIdentityFromALiveRead: a pod missing its pod-name label is
// relabelled from a fresh read, so the write keeps the fields the cache
// prunes (its containers).
func TestRepairsIdentityFromALiveRead(t *testing.T) {
	f := newFixture(t, []runtime.Object{newSet("web", 1)})
	f.settle("web", 10)
	p := f.apiPods()[0]
	delete(p.Labels, appsv1.StatefulSetPodNameLabel)
	if _, err := f.client.CoreV1().Pods("ns").Update(t.Context(), &p,
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.mustSync("web")
	got := f.apiPods()[0]
	if got.Labels[appsv1.StatefulSetPodNameLabel] != "web-0" {
		t.Errorf("labels %v", got.Labels)
	}
	if len(got.Spec.Containers) != 1 {
		t.Errorf("containers %v: the update wrote a pruned pod", got.Spec.Containers)
	}
	if !slices.Contains(controllertest.Events(f.recorder),
		"Normal SuccessfulUpdate Update Pod web-0 in StatefulSet web successful") {
		t.Errorf("events %q", controllertest.Events(f.recorder))
	}
}

// TestTerminalPodIsReplaced: a failed pod is deleted, then recreated.
func TestTerminalPodIsReplaced(t *testing.T) {
	f := newFixture(t, []runtime.Object{newSet("web", 1)})
	f.settle("web", 10)
	p := f.apiPods()[0]
	p.Status.Phase = corev1.PodFailed
	if _, err := f.client.CoreV1().Pods("ns").UpdateStatus(t.Context(), &p,
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.mustSync("web")
	if got := f.podNames(); got != "" {
		t.Fatalf("pods %q, want the failed pod deleted", got)
	}
	f.mustSync("web")
	if got := f.podNames(); got != "web-0" {
		t.Fatalf("pods %q, want web-0 again", got)
	}
}

// TestAdoptsOrphans: a matching orphan named as a member is adopted; one
// with another name is left alone; an orphan revision is adopted.
func TestAdoptsOrphans(t *testing.T) {
	set := newSet("web", 1)
	member := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0",
		UID: "orphan", Labels: map[string]string{"app": "web"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	stranger := member.DeepCopy()
	stranger.Name, stranger.UID = "other-0", "stranger"
	rev, err := newRevision(set, 1, ptr.To[int32](0))
	if err != nil {
		t.Fatal(err)
	}
	rev.OwnerReferences = nil
	f := newFixture(t, []runtime.Object{set, member, stranger, rev})
	f.mustSync("web")
	pods := f.apiPods()
	if metav1.GetControllerOf(&pods[1]) == nil {
		t.Error("web-0 not adopted")
	}
	if metav1.GetControllerOf(&pods[0]) != nil {
		t.Error("other-0 adopted")
	}
	if revs := f.revisions(); len(revs) != 1 || metav1.GetControllerOf(&revs[0]) == nil {
		t.Errorf("revisions %+v: the orphan was not adopted", revs)
	}
}

// TestMinReadySeconds: a ready pod is available only after
// minReadySeconds; the set is requeued for when it becomes so.
func TestMinReadySeconds(t *testing.T) {
	f := newFixture(t, []runtime.Object{newSet("web", 1, func(s *appsv1.StatefulSet) {
		s.Spec.MinReadySeconds = 10
	})})
	f.mustSync("web")
	f.kubelet()
	f.advance(4 * time.Second)
	f.mustSync("web")
	st := f.set("web").Status
	if st.ReadyReplicas != 1 || st.AvailableReplicas != 0 {
		t.Fatalf("status %+v", st)
	}
	if n := len(f.requeues); n == 0 || f.requeues[n-1].After != 6*time.Second {
		t.Fatalf("requeues %+v, want one in 6s", f.requeues)
	}
	f.advance(6 * time.Second)
	f.mustSync("web")
	if st := f.set("web").Status; st.AvailableReplicas != 1 {
		t.Errorf("status %+v", st)
	}
}

// TestCreateErrors: a refused pod create records FailedCreate and fails
// the sync; a claim being deleted holds the pod back.
func TestCreateErrors(t *testing.T) {
	t.Run("pod refused", func(t *testing.T) {
		f := newFixture(t, []runtime.Object{newSet("web", 1)})
		f.client.PrependReactor("create", "pods", func(clienttesting.Action) (bool,
			runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "web-0",
				errors.New("quota"))
		})
		if err := f.sync("web"); err == nil {
			t.Fatal("sync succeeded")
		}
		if !controllertest.HasEvent(controllertest.Events(f.recorder),
			"Warning FailedCreate Create Pod web-0 in StatefulSet web failed error:") {
			t.Errorf("events %q", controllertest.Events(f.recorder))
		}
	})
	t.Run("claim terminating", func(t *testing.T) {
		now := metav1.Now()
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns",
			Name: "data-web-0", DeletionTimestamp: &now, Finalizers: []string{"x"}}}
		f := newFixture(t, []runtime.Object{newSet("web", 1), claim})
		err := f.sync("web")
		if err == nil || !strings.Contains(err.Error(), "pvc data-web-0 is being deleted") {
			t.Fatalf("sync: %v", err)
		}
		if got := f.podNames(); got != "" {
			t.Errorf("pods %q", got)
		}
	})
}

// TestRecreateStrategy: with StatefulSetRecreateStrategy on, a new
// template deletes every old pod, makes the new ones only once all are
// gone, and reports progress in the Progressing condition.
func TestRecreateStrategy(t *testing.T) {
	f := newFixture(t, []runtime.Object{newSet("web", 3, func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{
			Type: appsv1.RecreateStatefulSetStrategyType}
	})}, func(c *config) { c.recreate = true })
	f.settle("web", 10)
	if got := f.podNames(); got != "web-0 web-1 web-2" {
		t.Fatalf("pods %q", got)
	}
	if c := progressing(&f.set("web").Status); c != nil {
		t.Fatalf("Progressing %+v before any update", c)
	}
	s := f.set("web")
	s.Spec.Template.Annotations = map[string]string{"rollout": "2"}
	f.update(s)
	f.mustSync("web")
	if got := f.podNames(); got != "" {
		t.Fatalf("pods %q, want every old pod deleted at once", got)
	}
	c := progressing(&f.set("web").Status)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != reasonRecreateInProgress {
		t.Fatalf("Progressing %+v", c)
	}
	f.settle("web", 10)
	st := f.set("web").Status
	if st.UpdatedReplicas != 3 || st.CurrentRevision != st.UpdateRevision {
		t.Fatalf("status %+v", st)
	}
	c = progressing(&st)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != reasonRecreateCompleted ||
		c.Message != "All pods recreated successfully" {
		t.Errorf("Progressing %+v", c)
	}
}

// TestRecreateStrategyIsRefused: as KCM with its gate off.
func TestRecreateStrategyIsRefused(t *testing.T) {
	f := newFixture(t, []runtime.Object{newSet("web", 1, func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{
			Type: appsv1.RecreateStatefulSetStrategyType}
	})})
	if err := f.sync("web"); err == nil {
		t.Fatal("sync succeeded")
	}
	if !controllertest.HasEvent(controllertest.Events(f.recorder), "Warning UnknownStrategy") {
		t.Errorf("events %q", controllertest.Events(f.recorder))
	}
}

// TestDeletedSet: a key whose set is gone is done.
func TestDeletedSet(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.sync("gone"); err != nil {
		t.Fatal(err)
	}
}
