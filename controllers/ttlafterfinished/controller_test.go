package ttlafterfinished

import (
	"errors"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type jobOpt func(*batchv1.Job)

func newJob(opts ...jobOpt) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       "ns",
			Name:            "j",
			UID:             "uid-j",
			ResourceVersion: "5",
		},
	}
	for _, o := range opts {
		o(j)
	}
	return j
}

func ttl(
	s int32,
) jobOpt {
	return func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ptr.To(s) }
}

// finished adds a true condition of type t whose transition was ago before t0.
func finished(t batchv1.JobConditionType, ago time.Duration) jobOpt {
	return func(j *batchv1.Job) {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
			Type: t, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-ago)),
		})
	}
}

func condition(t batchv1.JobConditionType, st corev1.ConditionStatus) jobOpt {
	return func(j *batchv1.Job) {
		j.Status.Conditions = append(
			j.Status.Conditions,
			batchv1.JobCondition{Type: t, Status: st, LastTransitionTime: metav1.NewTime(t0)},
		)
	}
}

func deleting(j *batchv1.Job) {
	ts := metav1.NewTime(t0)
	j.DeletionTimestamp = &ts
}

func rv(v string) jobOpt { return func(j *batchv1.Job) { j.ResourceVersion = v } }

type fixture struct {
	c        *controller
	client   *fake.Clientset
	clock    *testingclock.FakeClock
	requeues controllertest.Requeues
}

// newFixture puts cached in the lister and api in the fake clientset
// (cached, when api is nil; nothing when api is an empty non-nil slice).
func newFixture(t *testing.T, cached *batchv1.Job, api []*batchv1.Job) *fixture {
	t.Helper()
	var inCache []*batchv1.Job
	if cached != nil {
		inCache = []*batchv1.Job{cached}
	}
	if api == nil {
		api = inCache
	}
	idx := controllertest.NamespacedIndexer(t, inCache...)
	f := &fixture{
		client: fake.NewClientset(controllertest.DeepCopies(api...)...),
		clock:  testingclock.NewFakeClock(t0),
	}
	f.c = &controller{
		client:  f.client,
		jobs:    batchlisters.NewJobLister(idx),
		clock:   f.clock,
		workers: 1,
		after:   f.requeues.AddAfter,
	}
	f.c.loop = workloop.New("test", f.c.sync, workloop.Options{})
	t.Cleanup(f.c.loop.ShutDown)
	return f
}

// deletes counts Job deletes and checks their options: Foreground, UID and
// the resourceVersion of the API's copy.
func (f *fixture) deletes(t *testing.T, wantRV string) int {
	t.Helper()
	n := 0
	for _, a := range f.client.Actions() {
		d, ok := a.(k8stesting.DeleteActionImpl)
		if !ok {
			continue
		}
		n++
		o := d.DeleteOptions
		if o.PropagationPolicy == nil ||
			*o.PropagationPolicy != metav1.DeletePropagationForeground {
			t.Errorf("delete: propagation %v, want Foreground", o.PropagationPolicy)
		}
		if p := o.Preconditions; p == nil || p.UID == nil || *p.UID != types.UID("uid-j") ||
			p.ResourceVersion == nil ||
			*p.ResourceVersion != wantRV {
			t.Errorf("delete: preconditions %+v, want UID uid-j and resourceVersion %s", p, wantRV)
		}
	}
	return n
}

func (f *fixture) gets() int { return controllertest.CountActions(f.client, "get", "") }

func TestSync(t *testing.T) {
	tests := []struct {
		name        string
		cached      *batchv1.Job
		api         []*batchv1.Job
		deleteErr   error
		wantGets    int
		wantDeletes int
		wantRV      string
		wantRequeue time.Duration
		wantErr     bool
		wantPerm    bool
	}{
		{
			name:        "complete and past its TTL",
			cached:      newJob(ttl(5), finished(batchv1.JobComplete, 10*time.Second)),
			wantGets:    1,
			wantDeletes: 1,
			wantRV:      "5",
		},
		{name: "failed, TTL 0", cached: newJob(ttl(0), finished(batchv1.JobFailed, 0)),
			wantGets: 1, wantDeletes: 1, wantRV: "5"},
		{name: "finish time from the Complete condition, not others", cached: newJob(
			ttl(60),
			condition(
				batchv1.JobSuccessCriteriaMet,
				corev1.ConditionTrue,
			),
			finished(batchv1.JobComplete, 10*time.Second),
		),
			wantRequeue: 50 * time.Second},
		{
			name:        "TTL not reached: requeued",
			cached:      newJob(ttl(100), finished(batchv1.JobComplete, 10*time.Second)),
			wantRequeue: 90 * time.Second,
		},
		{
			name:        "finished in the future (skew): requeued",
			cached:      newJob(ttl(10), finished(batchv1.JobComplete, -5*time.Second)),
			wantRequeue: 15 * time.Second,
		},
		{name: "no TTL", cached: newJob(finished(batchv1.JobComplete, time.Hour))},
		{
			name: "not finished",
			cached: newJob(
				ttl(0),
				condition(batchv1.JobComplete, corev1.ConditionFalse),
				condition(batchv1.JobSuspended, corev1.ConditionTrue),
			),
		},
		{
			name:   "being deleted",
			cached: newJob(ttl(0), finished(batchv1.JobComplete, time.Hour), deleting),
		},
		{name: "gone from the cache"},
		{name: "TTL raised since cached: requeued by the fresh TTL",
			cached: newJob(ttl(5), finished(batchv1.JobComplete, 10*time.Second)),
			api: []*batchv1.Job{
				newJob(ttl(3600), finished(batchv1.JobComplete, 10*time.Second), rv("6")),
			},
			wantGets: 1, wantRequeue: 3590 * time.Second},
		{name: "fresh copy being deleted",
			cached: newJob(ttl(5), finished(batchv1.JobComplete, 10*time.Second)),
			api: []*batchv1.Job{
				newJob(ttl(5), finished(batchv1.JobComplete, 10*time.Second), deleting),
			},
			wantGets: 1},
		{
			name:     "gone from the API",
			cached:   newJob(ttl(5), finished(batchv1.JobComplete, 10*time.Second)),
			api:      []*batchv1.Job{},
			wantGets: 1,
		},
		{name: "fresh copy newer but also due: its resourceVersion is the precondition",
			cached: newJob(ttl(5), finished(batchv1.JobComplete, 10*time.Second)),
			api: []*batchv1.Job{
				newJob(ttl(5), finished(batchv1.JobComplete, 10*time.Second), rv("9")),
			},
			wantGets: 1, wantDeletes: 1, wantRV: "9"},
		{
			name:        "changed between read and delete: retried",
			cached:      newJob(ttl(5), finished(batchv1.JobComplete, 10*time.Second)),
			deleteErr:   apierrors.NewConflict(batchv1.Resource("jobs"), "j", errors.New("rv")),
			wantGets:    1,
			wantDeletes: 1,
			wantRV:      "5",
			wantErr:     true,
		},
		{
			name:        "deleted meanwhile",
			cached:      newJob(ttl(5), finished(batchv1.JobComplete, 10*time.Second)),
			deleteErr:   apierrors.NewNotFound(batchv1.Resource("jobs"), "j"),
			wantGets:    1,
			wantDeletes: 1,
			wantRV:      "5",
		},
		{
			name: "finished without lastTransitionTime: dropped",
			cached: newJob(ttl(5), func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{
					{Type: batchv1.JobComplete, Status: corev1.ConditionTrue},
				}
			}),
			wantErr:  true,
			wantPerm: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.cached, tt.api)
			if tt.deleteErr != nil {
				f.client.PrependReactor(
					"delete",
					"jobs",
					func(k8stesting.Action) (bool, runtime.Object, error) {
						return true, nil, tt.deleteErr
					},
				)
			}
			var before *batchv1.Job
			if tt.cached != nil {
				before = tt.cached.DeepCopy()
			}
			err := f.c.sync(controllertest.LogContext(t), "ns/j")
			if (err != nil) != tt.wantErr || workloop.IsPermanent(err) != tt.wantPerm {
				t.Errorf(
					"sync error %v, want error %v (permanent %v)",
					err,
					tt.wantErr,
					tt.wantPerm,
				)
			}
			if got := f.gets(); got != tt.wantGets {
				t.Errorf("GETs %d, want %d", got, tt.wantGets)
			}
			if got := f.deletes(t, tt.wantRV); got != tt.wantDeletes {
				t.Errorf("deletes %d, want %d", got, tt.wantDeletes)
			}
			switch {
			case tt.wantRequeue == 0 && len(f.requeues) != 0:
				t.Errorf("requeued %v, want none", f.requeues)
			case tt.wantRequeue != 0 && (len(f.requeues) != 1 || f.requeues[0] != controllertest.Requeue{Key: "ns/j", After: tt.wantRequeue}):
				t.Errorf("requeued %v, want once after %v", f.requeues, tt.wantRequeue)
			}
			if before != nil && !equality.Semantic.DeepEqual(before, tt.cached) {
				t.Error("the lister's job was modified")
			}
		})
	}
}

func TestTTLWithFakeClock(t *testing.T) {
	f := newFixture(t, newJob(ttl(60), finished(batchv1.JobComplete, 0)), nil)
	ctx := controllertest.LogContext(t)
	for _, step := range []struct {
		advance     time.Duration
		wantDeletes int
		wantLast    time.Duration
	}{
		{0, 0, time.Minute},
		{59 * time.Second, 0, time.Second},
		{time.Second, 1, time.Second},
	} {
		f.clock.Step(step.advance)
		if err := f.c.sync(ctx, "ns/j"); err != nil {
			t.Fatal(err)
		}
		if got := f.deletes(t, "5"); got != step.wantDeletes {
			t.Fatalf("after +%v: deletes %d, want %d", step.advance, got, step.wantDeletes)
		}
		if last := f.requeues[len(f.requeues)-1].After; last != step.wantLast {
			t.Fatalf("after +%v: last requeue after %v, want %v", step.advance, last, step.wantLast)
		}
	}
}

func TestFilter(t *testing.T) {
	tests := []struct {
		name string
		obj  any
		want bool
	}{
		{"finished with TTL", newJob(ttl(0), finished(batchv1.JobComplete, 0)), true},
		{"failed with TTL", newJob(ttl(10), finished(batchv1.JobFailed, 0)), true},
		{"finished without TTL", newJob(finished(batchv1.JobComplete, 0)), false},
		{"running with TTL", newJob(ttl(0)), false},
		{"being deleted", newJob(ttl(0), finished(batchv1.JobComplete, 0), deleting), false},
		{"not a job", &corev1.Pod{}, false},
		{"a tombstone of one to clean up", cache.DeletedFinalStateUnknown{
			Obj: newJob(ttl(0), finished(batchv1.JobComplete, 0))}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := finishedWithTTL(nil, tt.obj); got != tt.want {
				t.Errorf("finishedWithTTL = %v, want %v", got, tt.want)
			}
		})
	}
}
