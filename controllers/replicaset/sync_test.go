package replicaset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
	"github.com/ctrlhost/ctrlhost/workloop"
)

func quotaForbidden() error {
	return apierrors.NewForbidden(
		schema.GroupResource{Resource: "pods"},
		"",
		errors.New("exceeded quota: compute"),
	)
}

// failCreateNumber makes the n-th pod create (1-based) fail with err.
func failCreateNumber(f *fixture, n int64, err error) {
	var calls atomic.Int64
	f.client.PrependReactor(
		"create",
		"pods",
		func(clienttesting.Action) (bool, runtime.Object, error) {
			if calls.Add(1) == n {
				return true, nil, err
			}
			return false, nil, nil
		},
	)
}

func TestSlowStartBatch(t *testing.T) {
	tests := []struct {
		name      string
		count     int
		failAt    int // 1-based call number that fails; 0: none
		wantCalls int
		wantOK    int
	}{
		{"all succeed", 10, 0, 10, 10},
		{"first fails", 10, 1, 1, 0},
		{"third fails: batches 1 and 2 only", 10, 3, 3, 2},
		{"fourth fails: batch of 4 completes", 10, 4, 7, 6},
		{"nothing to do", 0, 0, 0, 0},
		{"batches are capped by the remainder", 5, 0, 5, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			ok, err := slowStartBatch(tt.count, 1, func() error {
				if int(calls.Add(1)) == tt.failAt {
					return errors.New("boom")
				}
				return nil
			})
			if int(calls.Load()) != tt.wantCalls || ok != tt.wantOK ||
				(err != nil) != (tt.failAt > 0) {
				t.Errorf(
					"calls %d, successes %d, err %v; want %d, %d, failure %v",
					calls.Load(),
					ok,
					err,
					tt.wantCalls,
					tt.wantOK,
					tt.failAt > 0,
				)
			}
		})
	}
}

func TestScaleUpSlowStart(t *testing.T) {
	rs := newRS("web", 10)
	f := newFixture(t, kindRS, rs)
	failCreateNumber(f, 3, quotaForbidden())

	err := f.sync("ns/web")
	if err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("sync = %v, want the create error", err)
	}
	if got := f.count("create pods"); got != 3 {
		t.Errorf("%d create calls, want 3 (a batch of 1, then a batch of 2 that failed)", got)
	}
	if got := len(f.apiPods()); got != 2 {
		t.Errorf("%d pods exist, want 2", got)
	}
	// 10 expected, 8 never attempted or failed: 2 remain to be observed.
	if adds, _, _ := f.c.exp.Pending("ns/web"); adds != 2 {
		t.Errorf("pending creations %d, want 2", adds)
	}
	for _, p := range f.createdPods() {
		ref := metav1.GetControllerOf(p)
		if p.GenerateName != "web-" || ref == nil || ref.UID != rs.UID ||
			ref.Kind != "ReplicaSet" ||
			p.Labels["tier"] != "front" {
			t.Errorf("created pod %+v", p.ObjectMeta)
		}
	}
	evs := f.events()
	if n := len(slices.DeleteFunc(slices.Clone(evs), func(e string) bool { return !strings.HasPrefix(e, "Normal SuccessfulCreate") })); n != 2 {
		t.Errorf("%d SuccessfulCreate events, want 2: %q", n, evs)
	}
	if !controllertest.HasEvent(evs, "Warning FailedCreate Error creating: ") {
		t.Errorf("no FailedCreate event: %q", evs)
	}
}

func TestBurstLimit(t *testing.T) {
	t.Run("creates", func(t *testing.T) {
		f := newFixture(t, kindRS, newRS("web", burstReplicas+100))
		if err := f.sync("ns/web"); err != nil {
			t.Fatal(err)
		}
		if got := f.count("create pods"); got != burstReplicas {
			t.Errorf("%d creates, want %d", got, burstReplicas)
		}
		if adds, _, _ := f.c.exp.Pending("ns/web"); adds != burstReplicas {
			t.Errorf("pending creations %d, want %d", adds, burstReplicas)
		}
	})
	t.Run("deletes", func(t *testing.T) {
		rs := newRS("web", 0)
		objs := []runtime.Object{rs}
		for i := range 10 {
			objs = append(objs, newPod(fmt.Sprintf("p%d", i), rs))
		}
		f := newFixture(t, kindRS, objs...)
		f.c.burst = 4
		if err := f.sync("ns/web"); err != nil {
			t.Fatal(err)
		}
		if got := len(f.deleted()); got != 4 {
			t.Errorf("%d deletes, want 4", got)
		}
		if _, dels, _ := f.c.exp.Pending("ns/web"); dels != 4 {
			t.Errorf("pending deletions %d, want 4", dels)
		}
	})
}

func TestExpectationsSuppressDuplicates(t *testing.T) {
	t.Run("creates", func(t *testing.T) {
		f := newFixture(t, kindRS, newRS("web", 3))
		if err := f.sync("ns/web"); err != nil {
			t.Fatal(err)
		}
		// The watch lags: the cache has no pods yet. Another sync (a status
		// update event, say) must not create more.
		if err := f.sync("ns/web"); err != nil {
			t.Fatal(err)
		}
		if got := f.count("create pods"); got != 3 {
			t.Fatalf("%d creates after two syncs with a lagging watch, want 3", got)
		}
		// Two of three arrive: still waiting.
		created := f.apiPods()
		for _, p := range created[:2] {
			f.cache(&p)
			f.c.addPod(&p)
		}
		if f.c.exp.Satisfied("ns/web") {
			t.Error("satisfied with one creation unobserved")
		}
		if err := f.sync("ns/web"); err != nil {
			t.Fatal(err)
		}
		if got := f.count("create pods"); got != 3 {
			t.Errorf("%d creates, want still 3", got)
		}
		f.cache(&created[2])
		f.c.addPod(&created[2])
		if !f.c.exp.Satisfied("ns/web") {
			t.Error("not satisfied after every creation was observed")
		}
		if err := f.sync("ns/web"); err != nil {
			t.Fatal(err)
		}
		if got := f.count("create pods"); got != 3 {
			t.Errorf("%d creates once all pods are cached, want 3", got)
		}
		if st := f.rsStatus("web"); st.Replicas != 3 {
			t.Errorf("status.replicas %d, want 3", st.Replicas)
		}
	})
	t.Run("creates resume after the TTL", func(t *testing.T) {
		f := newFixture(t, kindRS, newRS("web", 2))
		if err := f.sync("ns/web"); err != nil {
			t.Fatal(err)
		}
		f.clock.Step(6 * time.Minute) // the watch events were lost
		if err := f.sync("ns/web"); err != nil {
			t.Fatal(err)
		}
		if got := f.count("create pods"); got != 4 {
			t.Errorf("%d creates, want 4 (expectations expired)", got)
		}
	})
	t.Run("deletes", func(t *testing.T) {
		rs := newRS("web", 1)
		a, b, c := newPod("a", rs), newPod("b", rs), newPod("c", rs)
		f := newFixture(t, kindRS, rs, a, b, c)
		if err := f.sync("ns/web"); err != nil {
			t.Fatal(err)
		}
		if err := f.sync("ns/web"); err != nil {
			t.Fatal(err)
		}
		gone := f.deleted()
		if len(gone) != 2 {
			t.Fatalf("deleted %v after two syncs with a lagging watch, want 2 pods", gone)
		}
		// First the deletionTimestamp update, then the delete: one
		// observation.
		for _, name := range gone {
			p := map[string]*corev1.Pod{"a": a, "b": b, "c": c}[name]
			cur := p.DeepCopy()
			terminatingPod(cur)
			cur.ResourceVersion = "2"
			f.c.updatePod(p, cur)
			f.c.deletePod(cur)
		}
		if adds, dels, _ := f.c.exp.Pending("ns/web"); adds != 0 || dels != 0 {
			t.Errorf("pending %d/%d after observing both deletions, want 0/0", adds, dels)
		}
	})
}

func TestScaleDownPicksPods(t *testing.T) {
	rs := newRS("web", 1)
	old := epoch.Add(-10 * time.Hour)
	tests := []struct {
		name string
		pods []*corev1.Pod
		want string // the pod deleted
	}{
		{"unscheduled first", []*corev1.Pod{
			newPod("scheduled", rs, func(p *corev1.Pod) { p.Spec.NodeName = "n" }),
			newPod("unscheduled", rs),
		}, "unscheduled"},
		{"pending before running", []*corev1.Pod{
			newPod("running", rs, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }),
			newPod("pending", rs),
		}, "pending"},
		{"not ready before ready", []*corev1.Pod{
			newPod("ready", rs, readySince(old)),
			newPod(
				"notready",
				rs,
				func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning; p.Spec.NodeName = "node-1" },
			),
		}, "notready"},
		{"lower deletion cost first", []*corev1.Pod{
			newPod(
				"cheap",
				rs,
				readySince(old),
				func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.PodDeletionCost: "-5"} },
			),
			newPod(
				"dear",
				rs,
				readySince(epoch.Add(-time.Minute)),
				func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.PodDeletionCost: "100"} },
			),
		}, "cheap"},
		{"newer ready first", []*corev1.Pod{
			newPod("old", rs, readySince(old)),
			newPod("new", rs, readySince(epoch.Add(-time.Minute))),
		}, "new"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{rs}
			for _, p := range tt.pods {
				objs = append(objs, p)
			}
			f := newFixture(t, kindRS, objs...)
			if err := f.sync("ns/web"); err != nil {
				t.Fatal(err)
			}
			if got := f.deleted(); !slices.Equal(got, []string{tt.want}) {
				t.Errorf("deleted %v, want [%s]", got, tt.want)
			}
			if !controllertest.HasEvent(f.events(),
				"Normal SuccessfulDelete Deleted pod: "+tt.want) {
				t.Error("no SuccessfulDelete event")
			}
		})
	}
}

func TestAdoption(t *testing.T) {
	deleting := metav1.NewTime(epoch)
	tests := []struct {
		name       string
		cached     *appsv1.ReplicaSet // in the informer cache
		api        *appsv1.ReplicaSet // in the API server (recheck)
		wantAdopt  bool
		wantErr    string
		wantCreate int
	}{
		{
			name:      "orphan adopted after the recheck",
			cached:    newRS("web", 1),
			api:       newRS("web", 1),
			wantAdopt: true,
		},
		{
			name: "owner being deleted (cache)",
			cached: newRS(
				"web",
				1,
				func(rs *appsv1.ReplicaSet) { rs.DeletionTimestamp = &deleting },
			),
			api: newRS(
				"web",
				1,
				func(rs *appsv1.ReplicaSet) { rs.DeletionTimestamp = &deleting },
			),
		},
		{name: "owner being deleted (recheck)", cached: newRS("web", 1),
			api: newRS(
				"web",
				1,
				func(rs *appsv1.ReplicaSet) { rs.DeletionTimestamp = &deleting },
			), wantErr: "being deleted"},
		{name: "owner recreated (recheck)", cached: newRS("web", 1),
			api: newRS(
				"web",
				1,
				func(rs *appsv1.ReplicaSet) { rs.UID = "another" },
			), wantErr: "is gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orphan := newPod("orphan", nil)
			f := newFixture(t, kindRS, tt.api, orphan)
			f.cache(tt.cached) // replaces the API server's version in the cache
			err := f.sync("ns/web")
			if tt.wantErr == "" && err != nil ||
				tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("sync = %v, want error containing %q", err, tt.wantErr)
			}
			got, err := f.client.CoreV1().Pods("ns").Get(t.Context(), "orphan", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			adopted := metav1.IsControlledBy(got, tt.cached)
			if adopted != tt.wantAdopt {
				t.Errorf(
					"adopted = %v, want %v (refs %+v)",
					adopted,
					tt.wantAdopt,
					got.OwnerReferences,
				)
			}
			acts := f.actions()
			if tt.wantAdopt {
				if i, j := slices.Index(acts, "get replicasets"), slices.Index(acts, "patch pods"); i < 0 ||
					j < i {
					t.Errorf(
						"actions %v: want an uncached get of the ReplicaSet before the patch",
						acts,
					)
				}
				if st := f.rsStatus("web"); st.Replicas != 1 {
					t.Errorf("status.replicas %d, want the adopted pod counted", st.Replicas)
				}
			} else if slices.Contains(acts, "patch pods") {
				t.Errorf("actions %v: patched a pod without adopting", acts)
			}
			if n := f.count("create pods"); n != 0 {
				t.Errorf("%d creates, want 0", n)
			}
		})
	}
}

func TestRelease(t *testing.T) {
	rs := newRS("web", 1)
	kept := newPod("kept", rs)
	relabelled := newPod("relabelled", rs, withLabels(map[string]string{"app": "other"}))
	f := newFixture(t, kindRS, rs, kept, relabelled)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	got, err := f.client.CoreV1().Pods("ns").Get(t.Context(), "relabelled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 {
		t.Errorf("released pod still has %+v", got.OwnerReferences)
	}
	if n := f.count("create pods") + len(f.deleted()); n != 0 {
		t.Errorf("%d creates/deletes, want none (one matching pod remains)", n)
	}
	if st := f.rsStatus("web"); st.Replicas != 1 {
		t.Errorf("status.replicas %d, want 1", st.Replicas)
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		name          string
		minReady      int32
		pods          func(rs *appsv1.ReplicaSet) []*corev1.Pod
		want          appsv1.ReplicaSetStatus
		wantRequeue   time.Duration // 0: none
		wantNoUpdate  bool
		initialStatus *appsv1.ReplicaSetStatus
	}{
		{
			name: "counts",
			pods: func(rs *appsv1.ReplicaSet) []*corev1.Pod {
				return []*corev1.Pod{
					newPod("ready", rs, readySince(epoch.Add(-time.Minute))),
					newPod("partial-labels", rs, withLabels(webLabels)),
					newPod(
						"done",
						rs,
						func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded },
					),
					newPod("terminating", rs, terminatingPod),
				}
			},
			want: appsv1.ReplicaSetStatus{
				Replicas:             2,
				FullyLabeledReplicas: 1,
				ReadyReplicas:        1,
				AvailableReplicas:    1,
				TerminatingReplicas:  ptr.To[int32](1),
				ObservedGeneration:   1,
			},
		},
		{
			name:     "minReadySeconds: requeued for the first pod to become available",
			minReady: 30,
			pods: func(rs *appsv1.ReplicaSet) []*corev1.Pod {
				return []*corev1.Pod{
					newPod("a", rs, readySince(epoch.Add(-10*time.Second))), // available in 20s
					newPod("b", rs, readySince(epoch.Add(-25*time.Second))), // available in 5s
					newPod("c", rs, readySince(epoch.Add(-time.Minute))),    // available
				}
			},
			want: appsv1.ReplicaSetStatus{
				Replicas:             3,
				FullyLabeledReplicas: 3,
				ReadyReplicas:        3,
				AvailableReplicas:    1,
				TerminatingReplicas:  ptr.To[int32](0),
				ObservedGeneration:   1,
			},
			wantRequeue: 5 * time.Second,
		},
		{
			name:     "minReadySeconds: all available, no requeue",
			minReady: 30,
			pods: func(rs *appsv1.ReplicaSet) []*corev1.Pod {
				return []*corev1.Pod{newPod("a", rs, readySince(epoch.Add(-time.Minute)))}
			},
			want: appsv1.ReplicaSetStatus{
				Replicas:             1,
				FullyLabeledReplicas: 1,
				ReadyReplicas:        1,
				AvailableReplicas:    1,
				TerminatingReplicas:  ptr.To[int32](0),
				ObservedGeneration:   1,
			},
		},
		{
			name: "unchanged status is not written",
			pods: func(rs *appsv1.ReplicaSet) []*corev1.Pod {
				return []*corev1.Pod{newPod("a", rs)}
			},
			initialStatus: &appsv1.ReplicaSetStatus{
				Replicas:             1,
				FullyLabeledReplicas: 1,
				TerminatingReplicas:  ptr.To[int32](0),
				ObservedGeneration:   1,
			},
			want: appsv1.ReplicaSetStatus{
				Replicas:             1,
				FullyLabeledReplicas: 1,
				TerminatingReplicas:  ptr.To[int32](0),
				ObservedGeneration:   1,
			},
			wantNoUpdate: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := 0
			rs := newRS("web", 0, func(rs *appsv1.ReplicaSet) {
				rs.Spec.MinReadySeconds = tt.minReady
				if tt.initialStatus != nil {
					rs.Status = *tt.initialStatus
				}
			})
			objs := []runtime.Object{rs}
			for _, p := range tt.pods(rs) {
				objs = append(objs, p)
				if podstate.IsActive(p) {
					pods++
				}
			}
			rs.Spec.Replicas = ptr.To(int32(pods)) // no scaling in this test
			f := newFixture(t, kindRS, objs...)
			if err := f.sync("ns/web"); err != nil {
				t.Fatal(err)
			}
			if got := f.rsStatus("web"); !apiEqual(got, tt.want) {
				t.Errorf("status %+v, want %+v", got, tt.want)
			}
			if n := f.count("update replicasets/status"); (n == 0) != tt.wantNoUpdate {
				t.Errorf("%d status updates, want none: %v", n, tt.wantNoUpdate)
			}
			d, ok := f.requeue("ns/web")
			if tt.wantRequeue == 0 && ok || tt.wantRequeue != 0 && (!ok || d != tt.wantRequeue) {
				t.Errorf("requeue %v (%v), want %v", d, ok, tt.wantRequeue)
			}
		})
	}
}

func apiEqual(a, b appsv1.ReplicaSetStatus) bool {
	return a.Replicas == b.Replicas && a.FullyLabeledReplicas == b.FullyLabeledReplicas && a.ReadyReplicas == b.ReadyReplicas &&
		a.AvailableReplicas == b.AvailableReplicas &&
		ptr.Equal(a.TerminatingReplicas, b.TerminatingReplicas) &&
		a.ObservedGeneration == b.ObservedGeneration &&
		len(a.Conditions) == len(b.Conditions)
}

func TestReplicaFailureCondition(t *testing.T) {
	rs := newRS("web", 2)
	f := newFixture(t, kindRS, rs)
	f.client.PrependReactor(
		"create",
		"pods",
		func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, quotaForbidden()
		},
	)
	if err := f.sync("ns/web"); err == nil {
		t.Fatal("sync succeeded although every create fails")
	}
	st := f.rsStatus("web")
	c := condition(st, appsv1.ReplicaSetReplicaFailure)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != reasonFailedCreate ||
		!strings.Contains(c.Message, "exceeded quota") ||
		!c.LastTransitionTime.Time.Equal(epoch) {
		t.Fatalf("ReplicaFailure condition %+v", c)
	}
	if f.count("create pods") != 1 {
		t.Errorf(
			"%d creates, want 1 (the slow start stops at the first failure)",
			f.count("create pods"),
		)
	}

	// The quota is raised; the informer delivers the status update.
	f.client.ReactionChain = f.client.ReactionChain[1:]
	updated, err := f.client.AppsV1().ReplicaSets("ns").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.cache(updated)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if c := condition(f.rsStatus("web"), appsv1.ReplicaSetReplicaFailure); c != nil {
		t.Errorf("ReplicaFailure condition not cleared: %+v", c)
	}
	if got := len(f.apiPods()); got != 2 {
		t.Errorf("%d pods, want 2", got)
	}
}

func TestReplicationController(t *testing.T) {
	t.Run("scale up", func(t *testing.T) {
		rc := newRC("legacy", 2)
		f := newFixture(t, kindRC, rc)
		if err := f.sync("ns/legacy"); err != nil {
			t.Fatal(err)
		}
		created := f.createdPods()
		if len(created) != 2 {
			t.Fatalf("%d pods created, want 2", len(created))
		}
		ref := metav1.GetControllerOf(created[0])
		if ref == nil || ref.APIVersion != "v1" || ref.Kind != "ReplicationController" ||
			ref.Name != "legacy" ||
			ref.UID != rc.UID {
			t.Errorf("controller reference %+v", ref)
		}
		got, err := f.client.CoreV1().
			ReplicationControllers("ns").
			Get(t.Context(), "legacy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The pods are not cached yet, so replicas is still 0, but the
		// status was written to the RC, observing its generation.
		if got.Status.ObservedGeneration != 1 ||
			f.count("update replicationcontrollers/status") != 1 {
			t.Errorf("RC status %+v after %v", got.Status, f.actions())
		}
		if got.Spec.Template == nil || *got.Spec.Replicas != 2 ||
			got.Spec.Selector["app"] != "web" {
			t.Errorf("the status write changed the spec: %+v", got.Spec)
		}
	})
	t.Run("scale down, adopt, status", func(t *testing.T) {
		rc := newRC("legacy", 2)
		f := newFixture(t, kindRC, rc,
			newPod("a", rc, readySince(epoch.Add(-time.Hour))),
			newPod("b", rc),
			newPod("c", rc),
			newPod("orphan", nil, readySince(epoch.Add(-time.Hour))),
		)
		if err := f.sync("ns/legacy"); err != nil {
			t.Fatal(err)
		}
		orphan, err := f.client.CoreV1().Pods("ns").Get(t.Context(), "orphan", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !metav1.IsControlledBy(orphan, rc) {
			t.Errorf("orphan not adopted: %+v", orphan.OwnerReferences)
		}
		if got := f.deleted(); !slices.Equal(got, []string{"b", "c"}) {
			t.Errorf("deleted %v, want the two not-ready pods", got)
		}
		got, err := f.client.CoreV1().
			ReplicationControllers("ns").
			Get(t.Context(), "legacy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Replicas != 4 || got.Status.ReadyReplicas != 2 {
			t.Errorf(
				"RC status %+v, want 4 replicas (before the deletions are seen), 2 ready",
				got.Status,
			)
		}
		if evs := f.events(); !controllertest.HasEvent(evs, "Normal SuccessfulDelete") {
			t.Errorf("events %q", evs)
		}
	})
	t.Run("failure condition", func(t *testing.T) {
		f := newFixture(t, kindRC, newRC("legacy", 1))
		f.client.PrependReactor(
			"create",
			"pods",
			func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, quotaForbidden()
			},
		)
		if err := f.sync("ns/legacy"); err == nil {
			t.Fatal("sync succeeded although every create fails")
		}
		got, err := f.client.CoreV1().
			ReplicationControllers("ns").
			Get(t.Context(), "legacy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.Conditions) != 1 ||
			got.Status.Conditions[0].Type != corev1.ReplicationControllerReplicaFailure ||
			got.Status.Conditions[0].Reason != reasonFailedCreate {
			t.Errorf("RC conditions %+v", got.Status.Conditions)
		}
	})
}

func TestInvalidObjectsAreIsolated(t *testing.T) {
	bad := newRS("bad", 2, func(rs *appsv1.ReplicaSet) {
		rs.Spec.Selector = &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: "Resembles"},
			},
		}
	})
	empty := newRS(
		"empty",
		2,
		func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = &metav1.LabelSelector{} },
	)
	good := newRS("good", 2, func(rs *appsv1.ReplicaSet) {
		rs.Spec.Selector.MatchLabels = map[string]string{"app": "good"}
		rs.Spec.Template.Labels = map[string]string{"app": "good"}
	})
	f := newFixture(t, kindRS, bad, empty, good, newPod("orphan", nil))

	for _, key := range []string{"ns/bad", "ns/empty"} {
		err := f.sync(key)
		if err == nil || !workloop.IsPermanent(err) || !strings.Contains(err.Error(), "selector") {
			t.Errorf("sync %s = %v, want a permanent selector error", key, err)
		}
	}
	evs := f.events()
	if n := len(slices.DeleteFunc(slices.Clone(evs), func(e string) bool { return !strings.HasPrefix(e, "Warning InvalidSelector") })); n != 2 {
		t.Errorf("events %q, want two InvalidSelector warnings", evs)
	}
	if n := f.count("create pods") + f.count("patch pods"); n != 0 {
		t.Fatalf("an invalid object caused %d pod writes (%v)", n, f.actions())
	}
	if err := f.sync("ns/good"); err != nil {
		t.Fatalf("sync of a valid object next to invalid ones: %v", err)
	}
	if n := f.count("create pods"); n != 2 {
		t.Errorf("%d creates for the valid object, want 2", n)
	}
}

func TestMalformedOwnerRefs(t *testing.T) {
	rs := newRS("web", 2)
	broken := newPod("broken", nil, func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "Thing", Name: "x"},
		} // no UID
	})
	f := newFixture(t, kindRS, rs, broken, newPod("fine", rs))
	err := f.sync("ns/web")
	if err == nil || !workloop.IsPermanent(err) || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("sync = %v, want a permanent error naming the pod", err)
	}
	if !controllertest.HasEvent(f.events(),
		"Warning InvalidOwnerReferences Ignoring pod: ns/broken") {
		t.Error("no InvalidOwnerReferences event")
	}
	// The rest of the sync went on: one pod created, status written.
	if n := f.count("create pods"); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
	if n := f.count("patch pods"); n != 0 {
		t.Errorf("the broken pod was patched")
	}
	if st := f.rsStatus("web"); st.Replicas != 1 {
		t.Errorf("status.replicas %d, want 1 (the broken pod is not counted)", st.Replicas)
	}
}

func TestDeletedObjectForgetsExpectations(t *testing.T) {
	f := newFixture(t, kindRS)
	f.c.exp.ExpectCreations("ns/gone", 3)
	if err := f.sync("ns/gone"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := f.c.exp.Pending("ns/gone"); ok {
		t.Error("expectations of a deleted object kept")
	}
	if err := f.sync("not/a/key"); !workloop.IsPermanent(err) {
		t.Errorf("sync of a malformed key = %v, want a permanent error", err)
	}
}

func TestHandlers(t *testing.T) {
	rs := newRS("web", 1, func(rs *appsv1.ReplicaSet) { rs.Spec.MinReadySeconds = 10 })
	other := newRS(
		"other",
		1,
		func(rs *appsv1.ReplicaSet) { rs.Spec.Selector.MatchLabels = map[string]string{"app": "other"} },
	)
	f := newFixture(t, kindRS, rs, other)

	f.c.exp.ExpectCreations("ns/web", 1)
	owned := newPod("p", rs)
	f.c.addPod(owned)
	if !f.c.exp.Satisfied("ns/web") {
		t.Error("addPod of an owned pod did not observe the creation")
	}
	if f.c.loop.Len() != 1 {
		t.Errorf("queue length %d after addPod, want 1", f.c.loop.Len())
	}

	orphan := newPod("o", nil)
	f.c.addPod(orphan) // ns/web selects it, ns/other does not; ns/web is already queued
	if f.c.loop.Len() != 1 {
		t.Errorf("queue length %d after an orphan, want 1", f.c.loop.Len())
	}

	ready := owned.DeepCopy()
	readySince(epoch)(ready)
	ready.ResourceVersion = "2"
	f.c.updatePod(owned, ready)
	if d, ok := f.requeue("ns/web"); !ok || d != 10*time.Second {
		t.Errorf("pod became ready: requeue %v %v, want after minReadySeconds", d, ok)
	}

	foreign := newPod("f", nil, func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{
			*metav1.NewControllerRef(rs, corev1.SchemeGroupVersion.WithKind("ReplicationController")),
		}
	})
	f.c.exp.ExpectDeletions("ns/web", []string{"ns/f"})
	f.c.deletePod(foreign) // same name and UID, wrong kind: not ours
	if f.c.exp.Satisfied("ns/web") {
		t.Error("a pod of another kind was observed as ours")
	}

	// Resync: same resourceVersion, nothing happens.
	f.c.updatePod(ready, ready)

	f.c.deleteOwner(rs)
	if _, _, ok := f.c.exp.Pending("ns/web"); ok {
		t.Error("deleting the owner kept its expectations")
	}
}

// TestRunCancelled: Run with a done context returns at once and releases
// the queue (goleak checks the rest).
func TestRunCancelled(t *testing.T) {
	f := newFixture(t, kindRS)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.c.Run(ctx); err != nil {
		t.Fatalf("Run = %v", err)
	}
	f.c.loop.Add("ns/x")
	if f.c.loop.Len() != 0 {
		t.Error("the queue accepts keys after Run returned")
	}
}
