package job

import (
	"fmt"
	"sync"
	"sync/atomic"
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
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// epoch is the fake clocks' start.
var epoch = controllertest.Epoch

// fixture is a controller over a fake clientset whose informers are never
// started: tests put objects into the caches (directly, or from the fake
// API server with deliver, which calls the event handlers as a watch
// would) and call sync.
type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	c        *controller
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock

	mu       sync.Mutex
	requeues []time.Duration
}

type fixtureOption func(*config)

func withoutManagedBy(cfg *config) { cfg.managedBy = false }

func newFixture(t *testing.T, objs []runtime.Object, opts ...fixtureOption) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	generateNames(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	f := &fixture{
		t:        t,
		client:   client,
		factory:  factory,
		recorder: record.NewFakeRecorder(1000),
		clock:    clocktesting.NewFakeClock(epoch),
	}
	cfg := config{
		name: "test-job-controller", client: client,
		jobs: factory.Batch().V1().Jobs(), pods: factory.Core().V1().Pods(),
		recorder: f.recorder, workers: 1, clock: f.clock,
		managedBy: true, resetStartTimeOnSuspend: true, staleGuard: true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := newController(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.loop.ShutDown(); c.orphans.ShutDown() })
	c.enqueueAfter = func(_ string, d time.Duration) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requeues = append(f.requeues, d)
	}
	f.c = c
	for _, o := range objs {
		f.cache(o)
	}
	return f
}

// cache puts o into its informer's store without calling handlers, a pod
// with only the fields the controller declares it reads (as the host's
// informers hold it).
func (f *fixture) cache(o runtime.Object) {
	f.t.Helper()
	controllertest.CacheAs(f.t, Descriptor(Options{}), f.factory, o)
}

// cached returns copies of pods as the host's pod informer holds them for
// the controller: with only the fields it declares it reads.
func cached(t testing.TB, pods ...*corev1.Pod) []*corev1.Pod {
	t.Helper()
	return controllertest.Pruned(t, Descriptor(Options{}), pods...)
}

// deliver copies the fake API server's Jobs and pods (cached) into the
// caches and calls the event handlers for what changed, as the informers
// would.
func (f *fixture) deliver() {
	f.t.Helper()
	ctx := f.t.Context()
	jobs, err := f.client.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	jobStore := f.factory.Batch().V1().Jobs().Informer().GetIndexer()
	for i := range jobs.Items {
		j := &jobs.Items[i]
		old, ok, _ := jobStore.Get(j)
		if err := jobStore.Update(j); err != nil {
			f.t.Fatal(err)
		}
		if ok {
			f.c.updateJob(old, j)
		} else {
			f.c.addJob(j, false)
		}
	}
	pods, err := f.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	podStore := f.factory.Core().V1().Pods().Informer().GetIndexer()
	live := map[string]bool{}
	for i := range pods.Items {
		p := cached(f.t, &pods.Items[i])[0]
		live[podKey(p)] = true
		old, ok, _ := podStore.Get(p)
		if err := podStore.Update(p); err != nil {
			f.t.Fatal(err)
		}
		if ok {
			f.c.updatePod(old, p)
		} else {
			f.c.addPod(p, false)
		}
	}
	for _, o := range podStore.List() {
		if p := o.(*corev1.Pod); !live[podKey(p)] {
			if err := podStore.Delete(p); err != nil {
				f.t.Fatal(err)
			}
			f.c.deletePod(p, true)
		}
	}
}

func (f *fixture) sync(key string) error {
	f.t.Helper()
	return f.c.sync(f.t.Context(), key)
}

// mustSync syncs key and delivers the result to the caches.
func (f *fixture) mustSync(key string) {
	f.t.Helper()
	if err := f.sync(key); err != nil {
		f.t.Fatalf("sync %s: %v", key, err)
	}
	f.deliver()
}

func (f *fixture) lastRequeue() (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requeues) == 0 {
		return 0, false
	}
	return f.requeues[len(f.requeues)-1], true
}

func (f *fixture) clearActions() {
	f.client.ClearActions()
	f.mu.Lock()
	f.requeues = nil
	f.mu.Unlock()
}

// actions returns the recorded client actions as "verb resource[/sub]",
// list and watch left out.
func (f *fixture) actions() []string { return controllertest.Actions(f.client, "list", "watch") }

func (f *fixture) count(action string) int {
	n := 0
	for _, a := range f.actions() {
		if a == action {
			n++
		}
	}
	return n
}

// createdPods returns the pods created through the client since the last
// clearActions.
func (f *fixture) createdPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, a := range f.client.Actions() {
		if c, ok := a.(clienttesting.CreateAction); ok && c.GetResource().Resource == "pods" {
			out = append(out, c.GetObject().(*corev1.Pod))
		}
	}
	return out
}

// statusWrites returns the Job statuses written since the last
// clearActions, in order.
func (f *fixture) statusWrites() []batchv1.JobStatus {
	var out []batchv1.JobStatus
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && u.GetSubresource() == "status" {
			out = append(out, u.GetObject().(*batchv1.Job).Status)
		}
	}
	return out
}

// events drains the recorder.
func (f *fixture) events() []string {
	return controllertest.Events(f.recorder)
}

func (f *fixture) job(name string) *batchv1.Job {
	f.t.Helper()
	j, err := f.client.BatchV1().Jobs("ns").Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

func (f *fixture) apiPods() []corev1.Pod {
	f.t.Helper()
	l, err := f.client.CoreV1().Pods("ns").List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return l.Items
}

// setPod changes a pod on the fake API server (as a kubelet would).
func (f *fixture) setPod(name string, mods ...func(*corev1.Pod)) {
	f.t.Helper()
	p, err := f.client.CoreV1().Pods("ns").Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, m := range mods {
		m(p)
	}
	p.ResourceVersion = fmt.Sprint(rvCounter.Add(1))
	if _, err := f.client.CoreV1().Pods("ns").Update(f.t.Context(), p, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// setJob changes a Job's spec on the fake API server.
func (f *fixture) setJob(name string, mod func(*batchv1.Job)) {
	f.t.Helper()
	j := f.job(name)
	mod(j)
	j.Generation++
	if _, err := f.client.BatchV1().Jobs("ns").Update(f.t.Context(), j, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

var rvCounter atomic.Int64

// generateNames makes the fake API server name pods from generateName and
// give them UIDs and resourceVersions, as a real one does.
func generateNames(cs *fake.Clientset) {
	var n atomic.Int64
	cs.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if p, ok := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod); ok && p.Name == "" &&
			p.GenerateName != "" {
			id := n.Add(1)
			p.Name = fmt.Sprintf("%s%05d", p.GenerateName, id)
			p.UID = types.UID(fmt.Sprintf("generated-%d", id))
			p.ResourceVersion = fmt.Sprint(rvCounter.Add(1))
			p.CreationTimestamp = metav1.NewTime(epoch)
		}
		return false, nil, nil
	})
}

// newJob returns a NonIndexed Job named name in "ns" with the API
// server's defaults (parallelism 1, backoffLimit 6, a selector).
func newJob(name string, mods ...func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       "ns",
			Name:            name,
			UID:             types.UID("uid-" + name),
			Generation:      1,
			ResourceVersion: "1",
		},
		Spec: batchv1.JobSpec{
			Parallelism:  ptr.To[int32](1),
			BackoffLimit: ptr.To[int32](6),
			Selector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "uid-" + name},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
					"batch.kubernetes.io/controller-uid": "uid-" + name, "controller-uid": "uid-" + name,
					"batch.kubernetes.io/job-name": name, "job-name": name,
				}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "c", Image: "img"}},
				},
			},
		},
	}
	for _, m := range mods {
		m(j)
	}
	return j
}

func completions(n int32) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Spec.Completions = ptr.To(n) }
}

func parallelism(n int32) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To(n) }
}

func indexed(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion) }

func started(j *batchv1.Job) {
	t := metav1.NewTime(epoch)
	j.Status.StartTime = &t
}

// newPod returns a pending pod of job j (with its labels and the tracking
// finalizer), changed by mods.
func newPod(name string, j *batchv1.Job, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels:            j.Spec.Template.Labels,
			Finalizers:        []string{batchv1.JobTrackingFinalizer},
			CreationTimestamp: metav1.NewTime(epoch.Add(-time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(j, jobKind)},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

// finished makes a pod end in phase at t, its container exiting with code.
func finished(phase corev1.PodPhase, code int32, t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = phase
		p.Status.ContainerStatuses = []corev1.ContainerStatus{
			{Name: "c", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{
					ExitCode:   code,
					FinishedAt: metav1.NewTime(t),
				},
			}},
		}
	}
}

func running(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{
		{
			Type:               corev1.PodReady,
			Status:             corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(epoch),
		},
	}
}

func atIndex(ix int) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: fmt.Sprint(ix)}
	}
}

func withoutFinalizer(p *corev1.Pod) { p.Finalizers = nil }

func objects(objs ...runtime.Object) []runtime.Object { return objs }

func conditionOf(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	return findCondition(j.Status.Conditions, t)
}

type typesUID = types.UID

func clockAt(t time.Time) *clocktesting.FakeClock { return clocktesting.NewFakeClock(t) }

func epochTime() metav1.Time { return metav1.NewTime(epoch) }
