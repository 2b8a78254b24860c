//go:build integration

package differential_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/hpa"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/testenv"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
	"github.com/ctrlhost/ctrlhost/upstream/kcm"
)

func init() { pending = append(pending, hpa.Descriptor(hpa.NewOptions())) }

// The HPA settings both sides get, under KCM's flag names: a short sync
// period, and a CPU initialization period short enough that a pod's
// samples count as soon as it is ready (the fake metrics' times are of
// the second, as a pod's readiness times are).
const (
	hpaSyncPeriod    = time.Second
	hpaCPUInitPeriod = time.Millisecond
)

// fakeMetricsAPI serves metrics.k8s.io/v1beta1 from a table: every pod of
// a namespace uses the table's milli-CPU for it. It lists the pods from
// the API server, so both sides see the same samples for the same pods.
type fakeMetricsAPI struct {
	cs  kubernetes.Interface
	srv *httptest.Server
	mu  sync.Mutex
	cpu map[string]int64
}

func (m *fakeMetricsAPI) set(ns string, milliCPU int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cpu[ns] = milliCPU
}

func (m *fakeMetricsAPI) load(ns string) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.cpu[ns]
	return v, ok
}

const metricsGV = "metrics.k8s.io/v1beta1"

func (m *fakeMetricsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(v); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}
	gv := metav1.GroupVersionForDiscovery{GroupVersion: metricsGV, Version: "v1beta1"}
	group := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name: "metrics.k8s.io", Versions: []metav1.GroupVersionForDiscovery{gv},
		PreferredVersion: gv}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.URL.Path == "/apis":
		reply(metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList",
			APIVersion: "v1"}, Groups: []metav1.APIGroup{group}})
	case r.URL.Path == "/apis/metrics.k8s.io":
		reply(group)
	case r.URL.Path == "/apis/"+metricsGV:
		verbs := metav1.Verbs{"get", "list"}
		reply(metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList",
			APIVersion: "v1"}, GroupVersion: metricsGV, APIResources: []metav1.APIResource{
			{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: verbs},
			{Name: "nodes", Kind: "NodeMetrics", Verbs: verbs},
		}})
	case len(parts) == 6 && parts[3] == "namespaces" && parts[5] == "pods":
		list, err := m.podMetrics(r.Context(), parts[4], r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		reply(list)
	default:
		http.NotFound(w, r)
	}
}

func (m *fakeMetricsAPI) podMetrics(ctx context.Context, ns string,
	q url.Values) (*metricsv1beta1.PodMetricsList, error) {
	list := &metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList",
		APIVersion: metricsGV}}
	cpu, ok := m.load(ns)
	if !ok {
		return list, nil
	}
	pods, err := m.cs.CoreV1().Pods(ns).List(ctx,
		metav1.ListOptions{LabelSelector: q.Get("labelSelector")})
	if err != nil {
		return nil, err
	}
	now := metav1.Now()
	for _, p := range pods.Items {
		list.Items = append(list.Items, metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name, Labels: p.Labels},
			Timestamp:  now, Window: metav1.Duration{Duration: time.Second},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "c", Usage: corev1.ResourceList{
				corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)}}},
		})
	}
	return list, nil
}

var hpaAPIServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io",
	Version: "v1", Resource: "apiservices"}

// startFakeMetricsAPI serves the fake metrics API in the test process and
// registers it as v1beta1.metrics.k8s.io, behind an ExternalName Service
// of localhost the aggregator reaches it through, then waits until
// discovery serves it.
func startFakeMetricsAPI(t *testing.T, e *testenv.Env) *fakeMetricsAPI {
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeMetricsAPI{cs: cs, cpu: map[string]int64{}}
	m.srv = httptest.NewTLSServer(m)
	t.Cleanup(m.srv.Close)
	u, err := url.Parse(m.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	const svcNS = "fake-metrics"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: svcNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(svcNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName,
			ExternalName: "localhost"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1beta1.metrics.k8s.io"},
		"spec": map[string]any{
			"group": "metrics.k8s.io", "version": "v1beta1",
			"service": map[string]any{"namespace": svcNS, "name": "metrics",
				"port": int64(port)},
			"insecureSkipTLSVerify": true, "groupPriorityMinimum": int64(100),
			"versionPriority": int64(100),
		},
	}}
	if _, err := dyn.Resource(hpaAPIServices).Create(ctx, svc,
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true,
		func(ctx context.Context) (bool, error) {
			_, last = cs.Discovery().ServerResourcesForGroupVersion(metricsGV)
			if last != nil {
				return false, nil
			}
			_, last = cs.RESTClient().Get().AbsPath("/apis/" + metricsGV +
				"/namespaces/default/pods").DoRaw(ctx)
			return last == nil, nil
		}); err != nil {
		t.Fatalf("the fake metrics API is not served through the aggregator: %v (last: %v)",
			err, last)
	}
	return m
}

// hpaRunner is runner(t, e) with the HPA settings above on both sides.
func hpaRunner(t *testing.T, e *testenv.Env) differential.Runner {
	r := runner(t, e)
	descriptors := r.Descriptors
	r.Descriptors = func(side differential.Side) []descriptor.Descriptor {
		if side == differential.Native {
			o := hpa.NewOptions()
			o.SyncPeriod, o.CPUInitializationPeriod = hpaSyncPeriod, hpaCPUInitPeriod
			ds := descriptors(side)
			for i, d := range ds {
				if d.Name() == hpa.Name {
					ds[i] = hpa.Descriptor(o)
				}
			}
			return ds
		}
		o, err := kcm.NewOptions()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := o.Config(manager.NewOptions())
		if err != nil {
			t.Fatal(err)
		}
		cfg.HPAController.HorizontalPodAutoscalerSyncPeriod.Duration = hpaSyncPeriod
		cfg.HPAController.HorizontalPodAutoscalerCPUInitializationPeriod.Duration =
			hpaCPUInitPeriod
		cfg.SAController.RootCAFile = e.PKI().CAFile
		cfg.SAController.ServiceAccountKeyFile = e.PKI().ServiceAccountKeyFile
		ds, err := kcm.Descriptors(kcm.Config{Component: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	return r
}

// TestHPAScalesDeploymentOnCPU: an HPA over a Deployment of two pods,
// targeting 50% of their 100m CPU request, with a behaviour of at most 2
// pods more and 1 pod fewer per 10 minutes and no stabilization window.
// At 150m a pod it asks for 6 and the policy lets it reach 4
// (ScalingLimited ScaleUpLimit); once the four are ready the load drops
// to 30m a pod and it scales down to 3, then 2 (the scale-up of the
// period lets the scale-down policy go that far). Compared: the HPA (spec
// with the API server's defaults, status with its conditions, current
// metrics and replica counts), the Deployment, the pod count, the HPA's
// rescale events and every event reason.
func TestHPAScalesDeploymentOnCPU(t *testing.T) {
	e, err := testenv.Start(t.Context(), testenv.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	m := startFakeMetricsAPI(t, e)
	const (
		high, low = 150, 30
		settle    = time.Second // how long pods are ready before the next step
	)
	labels := map[string]string{"app": "web"}
	var mu sync.Mutex
	readySince := map[string]time.Time{} // namespace+step → when its pods were all ready
	atPeak := map[string]string{}        // namespace → the HPA's status when the load dropped
	// allReadyFor: every pod of ns is Running and ready, there are n, and
	// they have been for settle, as seen by earlier calls for step.
	allReadyFor := func(ctx context.Context, cs kubernetes.Interface, ns, step string,
		n int) (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := len(l.Items) == n
		for _, p := range l.Items {
			ready = ready && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
		}
		mu.Lock()
		defer mu.Unlock()
		if !ready {
			delete(readySince, ns+step)
			return false, nil
		}
		since, ok := readySince[ns+step]
		if !ok {
			readySince[ns+step] = time.Now()
			return false, nil
		}
		return time.Since(since) >= settle, nil
	}
	autoscaler := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1",
				Kind: "Deployment", Name: "web"},
			MinReplicas: ptr.To[int32](1), MaxReplicas: 6,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType,
						AverageUtilization: ptr.To[int32](50)}}}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{
					StabilizationWindowSeconds: ptr.To[int32](0),
					Policies: []autoscalingv2.HPAScalingPolicy{{
						Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 600}}},
				ScaleDown: &autoscalingv2.HPAScalingRules{
					StabilizationWindowSeconds: ptr.To[int32](0),
					Policies: []autoscalingv2.HPAScalingPolicy{{
						Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 600}}},
			},
		},
	}
	podSpec := pod("", nil).Spec
	podSpec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100m")}
	sc := differential.Scenario{
		Name:       "hpa scales a deployment up and down on CPU with a behaviour policy",
		Controller: hpa.Name,
		With:       []string{"deployment-controller", "replicaset-controller"},
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			m.set(ns, high)
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: podSpec}},
			}, metav1.CreateOptions{})
			return err
		}),
		// The kubelet's part, then the scenario's steps: the HPA once the
		// first two pods are ready; the load drops once the HPA has the
		// four it scaled to ready.
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := runReady(ctx, cs, ns); err != nil {
				return err
			}
			h, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web",
				metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				if ok, err := allReadyFor(ctx, cs, ns, "start", 2); !ok || err != nil {
					return err
				}
				_, err = cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx,
					autoscaler.DeepCopy(), metav1.CreateOptions{})
				return err
			case err != nil:
				return err
			}
			if cpu, _ := m.load(ns); cpu != high || h.Status.CurrentReplicas != 4 ||
				h.Status.DesiredReplicas != 4 {
				return nil
			}
			if ok, err := allReadyFor(ctx, cs, ns, "up", 4); !ok || err != nil {
				return err
			}
			mu.Lock()
			atPeak[ns] = hpaStatusLine(h)
			mu.Unlock()
			m.set(ns, low)
			return nil
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			var objs []runtime.Object
			h, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web",
				metav1.GetOptions{})
			switch {
			case err == nil:
				h.Kind = "HorizontalPodAutoscaler"
				objs = append(objs, h)
			case !apierrors.IsNotFound(err):
				return nil, err
			}
			d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			d.Kind = "Deployment"
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			cpu, _ := m.load(ns)
			mu.Lock()
			peak := atPeak[ns]
			mu.Unlock()
			rescales, err := hpaRescales(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			summary := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "Summary"},
				ObjectMeta: metav1.ObjectMeta{Name: "summary"},
				Data: map[string]string{"pods": fmt.Sprint(len(pods.Items)),
					"load": fmt.Sprint(cpu), "rescales": rescales, "atPeak": peak}}
			events, err := differential.EventSummary(ctx, cs, ns, nil)
			if err != nil {
				return nil, err
			}
			return append(objs, d, summary, events), nil
		},
		Settled: func(state []map[string]any) bool {
			s := fmt.Sprint(state)
			return strings.Contains(s, fmt.Sprintf("load:%d", low)) &&
				strings.Contains(s, "pods:2") &&
				strings.Contains(s, "currentReplicas:2 desiredReplicas:2")
		},
		Cleanup: hpaCleanup,
	}
	start := time.Now()
	res, err := hpaRunner(t, e).Run(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: both sides settled in %v", sc.Name, time.Since(start).Round(time.Millisecond))
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
	if s := fmt.Sprint(res.Native); !strings.Contains(s, "ScalingLimited=True ScaleUpLimit") ||
		!strings.Contains(s, "New size: 4") || !strings.Contains(s, "New size: 3") ||
		!strings.Contains(s, "New size: 2") {
		t.Errorf("the native side did not go through the scale-up limit and back down: %s", s)
	}
}

// hpaRescales lists the messages of the HPA's rescale events, in order
// of their first time (ties by message).
func hpaRescales(ctx context.Context, cs kubernetes.Interface, ns string) (string, error) {
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	type ev struct {
		at  time.Time
		msg string
	}
	var out []ev
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "HorizontalPodAutoscaler" {
			out = append(out, ev{e.FirstTimestamp.Time, e.Reason + ": " + e.Message})
		}
	}
	slices.SortFunc(out, func(a, b ev) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.msg, b.msg)
	})
	msgs := make([]string, 0, len(out))
	for _, e := range out {
		msgs = append(msgs, e.msg)
	}
	return strings.Join(msgs, "\n"), nil
}

// hpaStatusLine is an HPA's replica counts, conditions and current
// metrics, on one line.
func hpaStatusLine(h *autoscalingv2.HorizontalPodAutoscaler) string {
	parts := []string{fmt.Sprintf("current=%d desired=%d", h.Status.CurrentReplicas,
		h.Status.DesiredReplicas)}
	for _, c := range h.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason))
	}
	for _, mt := range h.Status.CurrentMetrics {
		if r := mt.Resource; r != nil && r.Current.AverageUtilization != nil {
			parts = append(parts, fmt.Sprintf("%s=%d%%", r.Name, *r.Current.AverageUtilization))
		}
	}
	return strings.Join(parts, "; ")
}

// hpaCleanup deletes what the scenario made (no garbage collector runs):
// the HPA, the Deployment, its ReplicaSets and pods, so that the next
// side's controllers find nothing of this one to act on.
func hpaCleanup(ctx context.Context, cs kubernetes.Interface, ns string) error {
	err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctx, "web",
		metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = cs.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := cs.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{}); err != nil {
		return err
	}
	return deletePods(ctx, cs, ns)
}
