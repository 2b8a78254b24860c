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
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/hpa"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/testenv"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
	"github.com/ctrlhost/ctrlhost/upstream/kcm"
)

// The HPA settings both sides get, under KCM's flag names: a short sync
// period, and a CPU initialization period short enough that a pod's
// samples count as soon as it is ready (the fake metrics' times are of
// the second, as a pod's readiness times are).
const (
	hpaSyncPeriod    = time.Second
	hpaCPUInitPeriod = time.Millisecond
)

// fakeMetricsAPI serves the metrics APIs from a table of values by
// namespace and metric name, in milli-units: metrics.k8s.io (every pod of
// a namespace uses its "cpu" in milli-CPU), custom.metrics.k8s.io/v1beta2
// (every pod has the namespace's value of a pods metric; any object the
// value of an object metric) and external.metrics.k8s.io/v1beta1 (one
// value). It lists pods from the API server, so both sides see the same
// samples for the same pods.
type fakeMetricsAPI struct {
	cs     kubernetes.Interface
	srv    *httptest.Server
	mu     sync.Mutex
	values map[string]map[string]int64
}

func (m *fakeMetricsAPI) set(ns, metric string, milli int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.values[ns] == nil {
		m.values[ns] = map[string]int64{}
	}
	m.values[ns][metric] = milli
}

func (m *fakeMetricsAPI) load(ns, metric string) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.values[ns][metric]
	return v, ok
}

const (
	metricsGV  = "metrics.k8s.io/v1beta1"
	customGV   = "custom.metrics.k8s.io/v1beta2"
	externalGV = "external.metrics.k8s.io/v1beta1"
)

var fakeMetricsGVs = []string{metricsGV, customGV, externalGV}

func (m *fakeMetricsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(v any, err error) {
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(v); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}
	groups := map[string]metav1.APIGroup{}
	var list []metav1.APIGroup
	for _, s := range fakeMetricsGVs {
		gv, _ := schema.ParseGroupVersion(s)
		d := metav1.GroupVersionForDiscovery{GroupVersion: s, Version: gv.Version}
		g := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
			Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{d},
			PreferredVersion: d}
		groups[gv.Group] = g
		list = append(list, g)
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	switch {
	case r.URL.Path == "/apis":
		reply(metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList",
			APIVersion: "v1"}, Groups: list}, nil)
	case len(parts) == 2 && groups[parts[1]].Name != "":
		reply(groups[parts[1]], nil)
	case len(parts) == 3 && slices.Contains(fakeMetricsGVs, parts[1]+"/"+parts[2]):
		verbs := metav1.Verbs{"get", "list"}
		res := []metav1.APIResource{{Name: "pods", Namespaced: true, Kind: "PodMetrics",
			Verbs: verbs}, {Name: "nodes", Kind: "NodeMetrics", Verbs: verbs}}
		if parts[1]+"/"+parts[2] != metricsGV {
			res = nil
		}
		reply(metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList",
			APIVersion: "v1"}, GroupVersion: parts[1] + "/" + parts[2],
			APIResources: res}, nil)
	case len(parts) < 6 || parts[3] != "namespaces":
		http.NotFound(w, r)
	case parts[1]+"/"+parts[2] == metricsGV && len(parts) == 6 && parts[5] == "pods":
		reply(m.podMetrics(r.Context(), parts[4], q))
	case parts[1]+"/"+parts[2] == customGV && len(parts) == 8:
		reply(m.customMetrics(r.Context(), parts[4], parts[5], parts[6], parts[7], q))
	case parts[1]+"/"+parts[2] == externalGV && len(parts) == 6:
		reply(m.externalMetrics(parts[4], parts[5]))
	default:
		http.NotFound(w, r)
	}
}

func (m *fakeMetricsAPI) pods(ctx context.Context, ns string, q url.Values) ([]corev1.Pod,
	error) {
	l, err := m.cs.CoreV1().Pods(ns).List(ctx,
		metav1.ListOptions{LabelSelector: q.Get("labelSelector")})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (m *fakeMetricsAPI) podMetrics(ctx context.Context, ns string,
	q url.Values) (*metricsv1beta1.PodMetricsList, error) {
	list := &metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList",
		APIVersion: metricsGV}}
	cpu, ok := m.load(ns, "cpu")
	if !ok {
		return list, nil
	}
	pods, err := m.pods(ctx, ns, q)
	if err != nil {
		return nil, err
	}
	now := metav1.Now()
	for _, p := range pods {
		list.Items = append(list.Items, metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name, Labels: p.Labels},
			Timestamp:  now, Window: metav1.Duration{Duration: time.Second},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "c", Usage: corev1.ResourceList{
				corev1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI)}}},
		})
	}
	return list, nil
}

// customMetrics answers a metric of every pod the selector matches (name
// "*"), or of one object.
func (m *fakeMetricsAPI) customMetrics(ctx context.Context, ns, res, name, metric string,
	q url.Values) (*custommetricsv1beta2.MetricValueList, error) {
	list := &custommetricsv1beta2.MetricValueList{TypeMeta: metav1.TypeMeta{
		Kind: "MetricValueList", APIVersion: customGV}}
	v, ok := m.load(ns, metric)
	if !ok {
		return list, nil
	}
	value := func(kind, apiVersion, name string) custommetricsv1beta2.MetricValue {
		return custommetricsv1beta2.MetricValue{
			DescribedObject: corev1.ObjectReference{Kind: kind, APIVersion: apiVersion,
				Namespace: ns, Name: name},
			Metric:    custommetricsv1beta2.MetricIdentifier{Name: metric},
			Timestamp: metav1.Now(), WindowSeconds: ptr.To[int64](1),
			Value: *resource.NewMilliQuantity(v, resource.DecimalSI),
		}
	}
	if name != "*" {
		list.Items = append(list.Items, value(res, "", name))
		return list, nil
	}
	if res != "pods" {
		return nil, fmt.Errorf("only pods are listed, not %s", res)
	}
	pods, err := m.pods(ctx, ns, q)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		list.Items = append(list.Items, value("Pod", "v1", p.Name))
	}
	return list, nil
}

func (m *fakeMetricsAPI) externalMetrics(ns,
	metric string) (*externalmetricsv1beta1.ExternalMetricValueList, error) {
	list := &externalmetricsv1beta1.ExternalMetricValueList{TypeMeta: metav1.TypeMeta{
		Kind: "ExternalMetricValueList", APIVersion: externalGV}}
	if v, ok := m.load(ns, metric); ok {
		list.Items = append(list.Items, externalmetricsv1beta1.ExternalMetricValue{
			MetricName: metric, Timestamp: metav1.Now(),
			Value: *resource.NewMilliQuantity(v, resource.DecimalSI)})
	}
	return list, nil
}

var hpaAPIServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io",
	Version: "v1", Resource: "apiservices"}

// startFakeMetricsAPI serves the fake metrics API in the test process and
// registers it as v1beta1.metrics.k8s.io, behind an ExternalName Service
// of localhost the aggregator reaches it through (and as
// v1beta2.custom.metrics.k8s.io and v1beta1.external.metrics.k8s.io),
// then waits until discovery serves them.
func startFakeMetricsAPI(t *testing.T, e *testenv.Env) *fakeMetricsAPI {
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeMetricsAPI{cs: cs, values: map[string]map[string]int64{}}
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
	for _, s := range fakeMetricsGVs {
		gv, _ := schema.ParseGroupVersion(s)
		svc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": gv.Version + "." + gv.Group},
			"spec": map[string]any{
				"group": gv.Group, "version": gv.Version,
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
	}
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true,
		func(ctx context.Context) (bool, error) {
			for _, gv := range fakeMetricsGVs {
				if _, last = cs.Discovery().ServerResourcesForGroupVersion(gv); last != nil {
					return false, nil
				}
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
	e, m := startHPAEnv(t)
	const high, low = 150, 30
	labels := map[string]string{"app": "web"}
	allReadyFor := podsReadyFor(time.Second)
	var mu sync.Mutex
	atPeak := map[string]string{} // namespace → the HPA's status when the load dropped
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
			m.set(ns, "cpu", high)
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
			if cpu, _ := m.load(ns, "cpu"); cpu != high || h.Status.CurrentReplicas != 4 ||
				h.Status.DesiredReplicas != 4 {
				return nil
			}
			if ok, err := allReadyFor(ctx, cs, ns, "up", 4); !ok || err != nil {
				return err
			}
			mu.Lock()
			atPeak[ns] = hpaStatusLine(h)
			mu.Unlock()
			m.set(ns, "cpu", low)
			return nil
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			objs, err := hpaObserve(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			cpu, _ := m.load(ns, "cpu")
			mu.Lock()
			peak := atPeak[ns]
			mu.Unlock()
			summary := objs[len(objs)-1].(*corev1.ConfigMap)
			summary.Data["load"] = fmt.Sprint(cpu)
			summary.Data["atPeak"] = peak
			return objs, nil
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
	logHPASummary(t, res.Native)
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
	if s := fmt.Sprint(res.Native); !strings.Contains(s, "ScalingLimited=True ScaleUpLimit") ||
		!strings.Contains(s, "New size: 4") || !strings.Contains(s, "New size: 3") ||
		!strings.Contains(s, "New size: 2") {
		t.Errorf("the native side did not go through the scale-up limit and back down: %s", s)
	}
}

// hpaRescales lists the HPAs' events, by HPA, then in order of their
// first time (ties by message).
func hpaRescales(ctx context.Context, cs kubernetes.Interface, ns string) (string, error) {
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	type ev struct {
		hpa string
		at  time.Time
		msg string
	}
	var out []ev
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "HorizontalPodAutoscaler" {
			out = append(out, ev{e.InvolvedObject.Name, e.FirstTimestamp.Time,
				e.Reason + ": " + e.Message})
		}
	}
	slices.SortFunc(out, func(a, b ev) int {
		if c := strings.Compare(a.hpa, b.hpa); c != 0 {
			return c
		}
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.msg, b.msg)
	})
	msgs := make([]string, 0, len(out))
	for _, e := range out {
		msgs = append(msgs, e.hpa+" "+e.msg)
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
		var name string
		var cur autoscalingv2.MetricValueStatus
		switch {
		case mt.Resource != nil:
			name, cur = string(mt.Resource.Name), mt.Resource.Current
		case mt.External != nil:
			name, cur = mt.External.Metric.Name, mt.External.Current
		case mt.Object != nil:
			name, cur = mt.Object.Metric.Name, mt.Object.Current
		case mt.Pods != nil:
			name, cur = mt.Pods.Metric.Name, mt.Pods.Current
		}
		v := []string{}
		if cur.AverageUtilization != nil {
			v = append(v, fmt.Sprintf("%d%%", *cur.AverageUtilization))
		}
		for _, q := range []*resource.Quantity{cur.AverageValue, cur.Value} {
			if q != nil {
				v = append(v, q.String())
			}
		}
		parts = append(parts, name+"="+strings.Join(v, " "))
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

// startHPAEnv starts an API server of the scenario's own with the fake
// metrics APIs behind its aggregator: the APIServices are cluster-wide,
// and would change discovery for every other scenario on a shared one.
func startHPAEnv(t *testing.T) (*testenv.Env, *fakeMetricsAPI) {
	e, err := testenv.Start(t.Context(), testenv.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	return e, startFakeMetricsAPI(t, e)
}

// podsReadyFor returns a check that every pod of ns is Running, that
// there are n, and that they have been so for settle, as seen by its
// earlier calls for the same step.
func podsReadyFor(settle time.Duration) func(context.Context, kubernetes.Interface, string,
	string, int) (bool, error) {
	var mu sync.Mutex
	since := map[string]time.Time{}
	return func(ctx context.Context, cs kubernetes.Interface, ns, step string,
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
			delete(since, ns+step)
			return false, nil
		}
		at, ok := since[ns+step]
		if !ok {
			since[ns+step] = time.Now()
			return false, nil
		}
		return time.Since(at) >= settle, nil
	}
}

// TestHPAScalesOnCustomAndExternalMetrics: an HPA without behaviour over
// a Deployment of one pod with three metrics: an external queue of 30
// (an average of 10 a pod wanted), an object metric of the Deployment at
// 50 (100 wanted) and a pods metric at 5 a pod (10 wanted). The queue
// wins and asks for 3; once the three pods are ready the queue drops to
// 5, the other metrics ask for 2, and the default 5-minute downscale
// window holds the 3 (ScaleDownStabilized). Compared as in
// TestHPAScalesDeploymentOnCPU, with every metric's current value.
func TestHPAScalesOnCustomAndExternalMetrics(t *testing.T) {
	e, m := startHPAEnv(t)
	readyFor := podsReadyFor(time.Second)
	var mu sync.Mutex
	atPeak := map[string]string{}
	labels := map[string]string{"app": "worker"}
	qty := func(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
	autoscaler := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1",
				Kind: "Deployment", Name: "web"},
			MaxReplicas: 5,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ExternalMetricSourceType,
					External: &autoscalingv2.ExternalMetricSource{
						Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth"},
						Target: autoscalingv2.MetricTarget{
							Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("10")}}},
				{Type: autoscalingv2.ObjectMetricSourceType,
					Object: &autoscalingv2.ObjectMetricSource{
						DescribedObject: autoscalingv2.CrossVersionObjectReference{
							APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
						Metric: autoscalingv2.MetricIdentifier{Name: "requests"},
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType,
							Value: qty("100")}}},
				{Type: autoscalingv2.PodsMetricSourceType,
					Pods: &autoscalingv2.PodsMetricSource{
						Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
						Target: autoscalingv2.MetricTarget{
							Type: autoscalingv2.AverageValueMetricType, AverageValue: qty("10")}}},
			},
		},
	}
	podSpec := pod("", nil).Spec
	sc := differential.Scenario{
		Name:       "hpa scales a deployment on external, object and pods metrics",
		Controller: hpa.Name,
		With:       []string{"deployment-controller", "replicaset-controller"},
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			m.set(ns, "queue_depth", 30000)
			m.set(ns, "requests", 50000)
			m.set(ns, "qps", 5000)
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: podSpec}},
			}, metav1.CreateOptions{})
			return err
		}),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := runReady(ctx, cs, ns); err != nil {
				return err
			}
			h, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web",
				metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				if ok, err := readyFor(ctx, cs, ns, "start", 1); !ok || err != nil {
					return err
				}
				_, err = cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx,
					autoscaler.DeepCopy(), metav1.CreateOptions{})
				return err
			case err != nil:
				return err
			}
			if q, _ := m.load(ns, "queue_depth"); q != 30000 || h.Status.CurrentReplicas != 3 ||
				h.Status.DesiredReplicas != 3 || !strings.Contains(fmt.Sprint(h.Status),
				"AverageValue:10") {
				return nil
			}
			if ok, err := readyFor(ctx, cs, ns, "up", 3); !ok || err != nil {
				return err
			}
			mu.Lock()
			atPeak[ns] = hpaStatusLine(h)
			mu.Unlock()
			m.set(ns, "queue_depth", 5000)
			return nil
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			objs, err := hpaObserve(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			q, _ := m.load(ns, "queue_depth")
			mu.Lock()
			peak := atPeak[ns]
			mu.Unlock()
			summary := objs[len(objs)-1].(*corev1.ConfigMap)
			summary.Data["queue"] = fmt.Sprint(q)
			summary.Data["atPeak"] = peak
			return objs, nil
		},
		Settled: func(state []map[string]any) bool {
			s := fmt.Sprint(state)
			return strings.Contains(s, "queue:5000") && strings.Contains(s, "pods:3") &&
				strings.Contains(s, "reason:ScaleDownStabilized")
		},
		Cleanup: hpaCleanup,
	}
	start := time.Now()
	res, err := hpaRunner(t, e).Run(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: both sides settled in %v", sc.Name, time.Since(start).Round(time.Millisecond))
	logHPASummary(t, res.Native)
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
	if s := fmt.Sprint(res.Native); !strings.Contains(s, "New size: 3; reason: external "+
		"metric queue_depth(nil) above target") {
		t.Errorf("the native side did not scale to 3 on the queue: %s", s)
	}
}

// hpaObserve returns the HPA named web (when there is one), the
// Deployment web, the event summary and last a Summary with the pod count
// and the HPA's events.
func hpaObserve(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object,
	error) {
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
	rescales, err := hpaRescales(ctx, cs, ns)
	if err != nil {
		return nil, err
	}
	events, err := differential.EventSummary(ctx, cs, ns, nil)
	if err != nil {
		return nil, err
	}
	summary := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "Summary"},
		ObjectMeta: metav1.ObjectMeta{Name: "summary"},
		Data:       map[string]string{"pods": fmt.Sprint(len(pods.Items)), "rescales": rescales}}
	return append(objs, d, events, summary), nil
}

// logHPASummary logs the Summary of a side's state: the HPA at the peak
// and its events.
func logHPASummary(t *testing.T, state []map[string]any) {
	for _, o := range state {
		if o["kind"] == "Summary" {
			t.Logf("native summary: %v", o["data"])
		}
	}
}

// TestHPAReportsWhatStopsIt: HPAs that cannot scale say why, as KCM's do:
// a target that does not exist (FailedGetScale), pods without a CPU
// request (FailedGetResourceMetric, FailedComputeMetricsReplicas), a
// target at zero (ScalingDisabled), and a target above maxReplicas,
// brought down without metrics (then without pods, no metrics). The
// targets are StatefulSets with pods of fixed names, and no controller
// but the HPA runs.
func TestHPAReportsWhatStopsIt(t *testing.T) {
	e, m := startHPAEnv(t)
	cpuHPA := func(name, kind string, maxReplicas int32) *autoscalingv2.HorizontalPodAutoscaler {
		return &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1",
					Kind: kind, Name: name},
				MaxReplicas: maxReplicas,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
					Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
						Target: autoscalingv2.MetricTarget{
							Type:               autoscalingv2.UtilizationMetricType,
							AverageUtilization: ptr.To[int32](50)}}}},
			},
		}
	}
	statefulSet := func(name string, replicas int32) *appsv1.StatefulSet {
		labels := map[string]string{"app": name}
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: pod("", nil).Spec}},
		}
	}
	sc := differential.Scenario{
		Name:       "hpa reports what stops it from scaling",
		Controller: hpa.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			m.set(ns, "cpu", 100)
			for _, s := range []*appsv1.StatefulSet{statefulSet("norequest", 1),
				statefulSet("zero", 0), statefulSet("big", 3)} {
				if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, s,
					metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			if _, err := cs.CoreV1().Pods(ns).Create(ctx,
				pod("norequest-0", map[string]string{"app": "norequest"}),
				metav1.CreateOptions{}); err != nil {
				return err
			}
			return nil
		}),
		// The pod runs; then the HPAs come, once it has been ready a second.
		Act: func() func(context.Context, kubernetes.Interface, string) error {
			readyFor := podsReadyFor(time.Second)
			return func(ctx context.Context, cs kubernetes.Interface, ns string) error {
				if err := runReady(ctx, cs, ns); err != nil {
					return err
				}
				if ok, err := readyFor(ctx, cs, ns, "start", 1); !ok || err != nil {
					return err
				}
				for _, h := range []*autoscalingv2.HorizontalPodAutoscaler{
					cpuHPA("missing", "Deployment", 5), cpuHPA("norequest", "StatefulSet", 5),
					cpuHPA("zero", "StatefulSet", 5), cpuHPA("big", "StatefulSet", 2),
				} {
					_, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, h,
						metav1.CreateOptions{})
					if err != nil && !apierrors.IsAlreadyExists(err) {
						return err
					}
				}
				return nil
			}
		}(),
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			var objs []runtime.Object
			hs, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx,
				metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for i := range hs.Items {
				hs.Items[i].Kind = "HorizontalPodAutoscaler"
				objs = append(objs, &hs.Items[i])
			}
			ss, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			for i := range ss.Items {
				ss.Items[i].Kind = "StatefulSet"
				objs = append(objs, &ss.Items[i])
			}
			events, err := hpaRescales(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			return append(objs, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "Summary"},
				ObjectMeta: metav1.ObjectMeta{Name: "summary"},
				Data:       map[string]string{"events": events}}), nil
		},
		Settled: func(state []map[string]any) bool {
			s := fmt.Sprint(state)
			return strings.Contains(s, "reason:FailedGetScale") &&
				strings.Contains(s, "reason:ScalingDisabled") &&
				strings.Count(s, "reason:FailedGetResourceMetric") == 2 &&
				strings.Contains(s, "New size: 2")
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).DeleteCollection(ctx,
				metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				return err
			}
			return deletePods(ctx, cs, ns)
		},
	}
	start := time.Now()
	res, err := hpaRunner(t, e).Run(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: both sides settled in %v", sc.Name, time.Since(start).Round(time.Millisecond))
	logHPASummary(t, res.Native)
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
}

// TestHPAScalesToZeroAndBack: with minReplicas 0 (HPAScaleToZero, on in
// 1.37) and an external metric, an HPA takes its Deployment from 1 to 2
// pods on a queue of 20 (10 a pod wanted), to zero when the queue empties
// (ScaledToZero True), keeps computing at zero, and brings it back to 3
// when 30 arrive (ScaledToZero False). Its behaviour has no windows and
// policies of ten minutes, so that the limits do not depend on timing.
func TestHPAScalesToZeroAndBack(t *testing.T) {
	e, m := startHPAEnv(t)
	readyFor := podsReadyFor(time.Second)
	var mu sync.Mutex
	steps := map[string][]string{} // namespace → the HPA's status at each step
	labels := map[string]string{"app": "jobs"}
	policies := func(t autoscalingv2.HPAScalingPolicyType,
		v int32) *autoscalingv2.HPAScalingRules {
		return &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0),
			Policies: []autoscalingv2.HPAScalingPolicy{{Type: t, Value: v,
				PeriodSeconds: 600}}}
	}
	avg := resource.MustParse("10")
	autoscaler := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1",
				Kind: "Deployment", Name: "web"},
			MinReplicas: ptr.To[int32](0), MaxReplicas: 3,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType,
				External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "jobs"},
					Target: autoscalingv2.MetricTarget{
						Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg}}}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp:   policies(autoscalingv2.PodsScalingPolicy, 4),
				ScaleDown: policies(autoscalingv2.PercentScalingPolicy, 100),
			},
		},
	}
	// step moves the queue from one value to the next once the HPA holds
	// n replicas and the n pods have been ready a second, recording the
	// HPA's status.
	step := func(ctx context.Context, cs kubernetes.Interface, ns string,
		h *autoscalingv2.HorizontalPodAutoscaler, from, to int64, n int32) error {
		if jobs, _ := m.load(ns, "jobs"); jobs != from || h.Status.CurrentReplicas != n ||
			h.Status.DesiredReplicas != n {
			return nil
		}
		if ok, err := readyFor(ctx, cs, ns, fmt.Sprint(from), int(n)); !ok || err != nil {
			return err
		}
		mu.Lock()
		steps[ns] = append(steps[ns], hpaStatusLine(h))
		mu.Unlock()
		m.set(ns, "jobs", to)
		return nil
	}
	sc := differential.Scenario{
		Name:       "hpa scales a deployment to zero and back on an external metric",
		Controller: hpa.Name,
		With:       []string{"deployment-controller", "replicaset-controller"},
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			m.set(ns, "jobs", 20000)
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: pod("", nil).Spec}},
			}, metav1.CreateOptions{})
			return err
		}),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := runReady(ctx, cs, ns); err != nil {
				return err
			}
			h, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web",
				metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				if ok, err := readyFor(ctx, cs, ns, "start", 1); !ok || err != nil {
					return err
				}
				_, err = cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx,
					autoscaler.DeepCopy(), metav1.CreateOptions{})
				return err
			case err != nil:
				return err
			}
			if err := step(ctx, cs, ns, h, 20000, 0, 2); err != nil {
				return err
			}
			return step(ctx, cs, ns, h, 0, 30000, 0)
		},
		Observe: func(ctx context.Context, cs kubernetes.Interface,
			ns string) ([]runtime.Object, error) {
			objs, err := hpaObserve(ctx, cs, ns)
			if err != nil {
				return nil, err
			}
			jobs, _ := m.load(ns, "jobs")
			mu.Lock()
			seen := strings.Join(steps[ns], "\n")
			mu.Unlock()
			summary := objs[len(objs)-1].(*corev1.ConfigMap)
			summary.Data["jobs"] = fmt.Sprint(jobs)
			summary.Data["steps"] = seen
			return objs, nil
		},
		Settled: func(state []map[string]any) bool {
			s := fmt.Sprint(state)
			return strings.Contains(s, "jobs:30000") && strings.Contains(s, "pods:3") &&
				strings.Contains(s, "currentReplicas:3 desiredReplicas:3")
		},
		Cleanup: hpaCleanup,
	}
	start := time.Now()
	res, err := hpaRunner(t, e).Run(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: both sides settled in %v", sc.Name, time.Since(start).Round(time.Millisecond))
	logHPASummary(t, res.Native)
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
	if s := fmt.Sprint(res.Native); !strings.Contains(s, "ScaledToZero=True ScaledToZero") ||
		!strings.Contains(s, "New size: 0") {
		t.Errorf("the native side did not scale to zero: %s", s)
	}
}
