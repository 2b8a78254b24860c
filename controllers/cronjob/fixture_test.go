package cronjob

import (
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// epoch is the fake clocks' start: 12:00:30 UTC, half a minute past a
// schedule time of every-minute schedules.
var epoch = time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)

// fixture is a controller over a fake clientset whose informers are never
// started: tests put objects into the caches and call reconcile or sync.
type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	c        *controller
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock

	mu       sync.Mutex
	requeues map[string]time.Duration
	enqueued []string
}

func newFixture(t *testing.T, now time.Time, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	f := &fixture{
		t: t, client: client, factory: factory,
		recorder: record.NewFakeRecorder(1000),
		clock:    clocktesting.NewFakeClock(now),
		requeues: map[string]time.Duration{},
	}
	c, err := newController(config{
		name: "test-cronjob-controller", client: client,
		cronJobs: factory.Batch().V1().CronJobs(), jobs: factory.Batch().V1().Jobs(),
		recorder: f.recorder, workers: 1, clock: f.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.loop.ShutDown)
	c.enqueueNow = func(key string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.enqueued = append(f.enqueued, key)
	}
	c.enqueueAfter = func(key string, d time.Duration) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requeues[key] = d
	}
	f.c = c
	for _, o := range objs {
		f.cache(o)
	}
	return f
}

// cache puts o into its informer's store without calling handlers.
func (f *fixture) cache(o runtime.Object) {
	f.t.Helper()
	controllertest.Cache(f.t, f.factory, o)
}

// events drains the recorder: "<type> <reason> <message>" each.
func (f *fixture) events() []string {
	return controllertest.Events(f.recorder)
}

// reasons drains the recorder and returns the events' reasons.
func (f *fixture) reasons() []string {
	var out []string
	for _, e := range f.events() {
		out = append(out, strings.Fields(e)[1])
	}
	return out
}

// actions returns the client's actions as "verb resource[/subresource]",
// without list and watch.
func (f *fixture) actions() []string { return controllertest.Actions(f.client, "list", "watch") }

func (f *fixture) created() []*batchv1.Job {
	var out []*batchv1.Job
	for _, a := range f.client.Actions() {
		if c, ok := a.(clienttesting.CreateAction); ok {
			if j, ok := c.GetObject().(*batchv1.Job); ok {
				out = append(out, j)
			}
		}
	}
	return out
}

// cronJob returns a CronJob "cj" in "ns" created at created, changed by
// mods.
func cronJob(schedule string, created time.Time, mods ...func(*batchv1.CronJob)) *batchv1.CronJob {
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "cj", UID: "cj-uid",
			CreationTimestamp: metav1.NewTime(created),
		},
		Spec: batchv1.CronJobSpec{
			Schedule:          schedule,
			ConcurrencyPolicy: batchv1.AllowConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{"app": "x"},
					Annotations: map[string]string{"a": "b"},
				},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "c", Image: "i"}},
				}}},
			},
		},
	}
	for _, m := range mods {
		m(cj)
	}
	return cj
}

// job returns a Job name controlled by cj, changed by mods.
func job(cj *batchv1.CronJob, name string, mods ...func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Namespace: cj.Namespace, Name: name, UID: types.UID(name + "-uid"),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, cronJobKind)},
	}}
	for _, m := range mods {
		m(j)
	}
	return j
}

func completedAt(start, done time.Time) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		s, d := metav1.NewTime(start), metav1.NewTime(done)
		j.Status.StartTime, j.Status.CompletionTime = &s, &d
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue},
		}
	}
}

func failedAt(start time.Time) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		s := metav1.NewTime(start)
		j.Status.StartTime = &s
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue},
		}
	}
}

func active(jobs ...*batchv1.Job) func(*batchv1.CronJob) {
	return func(cj *batchv1.CronJob) {
		for _, j := range jobs {
			cj.Status.Active = append(cj.Status.Active, jobRef(j))
		}
	}
}

func lastScheduled(t time.Time) func(*batchv1.CronJob) {
	return func(cj *batchv1.CronJob) { cj.Status.LastScheduleTime = &metav1.Time{Time: t} }
}
