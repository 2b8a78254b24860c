package hpa

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

const ns = "default"

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// fakeMetrics answers the metrics APIs from tables.
type fakeMetrics struct {
	mu             sync.Mutex
	cpu            map[string]int64 // pod → milli-CPU
	at             time.Time
	window         time.Duration
	custom         map[string]int64 // pod → milli-value of any pods metric
	objectValue    int64
	externalValues []int64
	err            error
}

func (f *fakeMetrics) resource(_ context.Context, res corev1.ResourceName, _ string,
	_ labels.Selector, _ string) (podMetrics, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, time.Time{}, f.err
	}
	if len(f.cpu) == 0 {
		return nil, time.Time{}, errors.New("no metrics returned from resource metrics API")
	}
	out := podMetrics{}
	for p, v := range f.cpu {
		out[p] = podMetric{timestamp: f.at, window: f.window, value: v}
	}
	return out, f.at, nil
}

func (f *fakeMetrics) pods(context.Context, string, string, labels.Selector,
	labels.Selector) (podMetrics, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := podMetrics{}
	for p, v := range f.custom {
		out[p] = podMetric{timestamp: f.at, window: time.Minute, value: v}
	}
	return out, f.at, f.err
}

func (f *fakeMetrics) object(context.Context, string, string,
	*autoscalingv2.CrossVersionObjectReference, labels.Selector) (int64, time.Time, error) {
	return f.objectValue, f.at, f.err
}

func (f *fakeMetrics) external(context.Context, string, string,
	labels.Selector) ([]int64, time.Time, error) {
	return f.externalValues, f.at, f.err
}

// runningPod is a ready pod started long ago, requesting cpu millicores.
func runningPod(name string, cpu int64) *corev1.Pod {
	started := metav1.NewTime(t0.Add(-time.Hour))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady,
				Status: corev1.ConditionTrue, LastTransitionTime: started}}},
	}
}

// cpuHPA targets Deployment web at util% CPU, between 1 and max.
func cpuHPA(util, maxReplicas int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Generation: 1},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1",
				Kind: "Deployment", Name: "web"},
			MinReplicas: ptr.To[int32](1), MaxReplicas: maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType,
						AverageUtilization: ptr.To(util)}}}},
		},
	}
}

// fixture is a controller over fakes: a clientset holding the HPA, a
// scale client whose Deployment web has replicas, and fake metrics.
type fixture struct {
	t        *testing.T
	c        *controller
	client   *fake.Clientset
	scales   *scalefake.FakeScaleClient
	metrics  *fakeMetrics
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	replicas int32
	selector string
	scaleErr error
	updates  []int32
	hpaIdx   cache.Indexer
}

func newFixture(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler, replicas int32,
	pods ...*corev1.Pod) *fixture {
	t.Helper()
	f := &fixture{t: t, client: fake.NewClientset(hpa), scales: &scalefake.FakeScaleClient{},
		metrics: &fakeMetrics{at: t0, window: 30 * time.Second, cpu: map[string]int64{}},
		clock:   clocktesting.NewFakeClock(t0), recorder: record.NewFakeRecorder(100),
		replicas: replicas, selector: "app=web"}
	f.scales.AddReactor("get", "deployments", func(k8stesting.Action) (bool, runtime.Object,
		error) {
		if f.scaleErr != nil {
			return true, nil, f.scaleErr
		}
		return true, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec:       autoscalingv1.ScaleSpec{Replicas: f.replicas},
			Status:     autoscalingv1.ScaleStatus{Replicas: f.replicas, Selector: f.selector},
		}, nil
	})
	f.scales.AddReactor("update", "deployments", func(a k8stesting.Action) (bool,
		runtime.Object, error) {
		s := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		f.updates = append(f.updates, s.Spec.Replicas)
		f.replicas = s.Spec.Replicas
		return true, s, nil
	})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		meta.RESTScopeNamespace)
	factory := informers.NewSharedInformerFactory(f.client, 0)
	hpaInf := factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer()
	podInf := factory.Core().V1().Pods().Informer()
	o := NewOptions()
	o.Clock = f.clock
	c, err := newController(o, deps{name: Name, hpaClient: f.client.AutoscalingV2(),
		scales: f.scales, mapper: mapper, metrics: f.metrics, hpas: hpaInf, pods: podInf,
		recorder: f.recorder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.loop.ShutDown)
	f.c, f.hpaIdx = c, hpaInf.GetIndexer()
	if err := hpaInf.GetIndexer().Add(hpa); err != nil {
		t.Fatal(err)
	}
	for _, p := range controllertest.Pruned(t, Descriptor(NewOptions()), pods...) {
		if err := podInf.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	c.added(hpa, false)
	return f
}

// sync reconciles the HPA once and returns its written status (the last
// one written, or nil) and the error.
func (f *fixture) sync() (*autoscalingv2.HorizontalPodAutoscalerStatus, error) {
	f.t.Helper()
	f.client.ClearActions()
	hpa, err := f.c.hpas.HorizontalPodAutoscalers(ns).Get("web")
	if err != nil {
		f.t.Fatal(err)
	}
	err = f.c.reconcile(f.t.Context(), hpa, ns+"/web")
	var st *autoscalingv2.HorizontalPodAutoscalerStatus
	for _, a := range f.client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok && a.GetSubresource() == "status" {
			written := u.GetObject().(*autoscalingv2.HorizontalPodAutoscaler)
			st = &written.Status
			// The cache sees the write, as an informer would deliver it.
			if err := f.hpaIdx.Update(written.DeepCopy()); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	return st, err
}

// events drains the recorded events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func cond(st *autoscalingv2.HorizontalPodAutoscalerStatus,
	t autoscalingv2.HorizontalPodAutoscalerConditionType) string {
	if st == nil {
		return "<no status written>"
	}
	for _, c := range st.Conditions {
		if c.Type == t {
			return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "<none>"
}
