package resourcequota

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

// epoch is the fake clocks' start.
var epoch = controllertest.Epoch

// rl builds a resource list from name, quantity pairs.
func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func ctr(name string, req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{
		Name:      name,
		Image:     "i",
		Resources: corev1.ResourceRequirements{Requests: req, Limits: lim},
	}
}

func testPod(name string, cs ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       corev1.PodSpec{Containers: cs},
	}
}

// cached returns pod as the host's pods informer holds it: with only the
// fields the controller declares it reads (podReads).
func cached(t testing.TB, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	return controllertest.Pruned(t, Descriptor(NewOptions()), pod)[0]
}

// checkList compares got with want: same names, equal quantities.
func checkList(t *testing.T, what string, got, want corev1.ResourceList) {
	t.Helper()
	if !sameLists(got, want) {
		t.Errorf("%s:\n got  %v\n want %v", what, fmtList(got), fmtList(want))
	}
}

func fmtList(l corev1.ResourceList) map[corev1.ResourceName]string {
	out := map[corev1.ResourceName]string{}
	for k, v := range l {
		out[k] = v.String()
	}
	return out
}

// actuated is what the kubelet reports a container runs with: cpu
// requests and limits.
func actuated(req, lim string) *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{Requests: rl("cpu", req), Limits: rl("cpu", lim)}
}

func TestPodUsage(t *testing.T) {
	sidecar := ctr("side", rl("cpu", "200m", "memory", "64Mi"), rl("cpu", "200m"))
	sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	tests := []struct {
		name     string
		pod      func() *corev1.Pod
		podLevel bool
		want     corev1.ResourceList
	}{
		{
			"best effort counts the pod only",
			func() *corev1.Pod { return testPod("p", ctr("c", nil, nil)) },
			false,
			rl("count/pods", "1", "pods", "1"),
		},
		{"requests and limits of two containers add up", func() *corev1.Pod {
			return testPod(
				"p",
				ctr("a", rl("cpu", "100m", "memory", "1Gi"), rl("cpu", "1")),
				ctr(
					"b",
					rl("cpu", "250m", "ephemeral-storage", "2Gi"),
					rl("memory", "2Gi", "ephemeral-storage", "3Gi"),
				),
			)
		}, false, rl(
			"count/pods",
			"1",
			"pods",
			"1",
			"cpu",
			"350m",
			"requests.cpu",
			"350m",
			"memory",
			"1Gi",
			"requests.memory",
			"1Gi",
			"limits.cpu",
			"1",
			"limits.memory",
			"2Gi",
			"ephemeral-storage",
			"2Gi",
			"requests.ephemeral-storage",
			"2Gi",
			"limits.ephemeral-storage",
			"3Gi",
		)},
		{"a larger init container raises the requests", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "100m"), nil))
			p.Spec.InitContainers = []corev1.Container{
				ctr("init", rl("cpu", "2", "memory", "10Mi"), nil),
			}
			return p
		}, false, rl("count/pods", "1", "pods", "1", "cpu", "2", "requests.cpu", "2", "memory", "10Mi", "requests.memory", "10Mi")},
		{"a sidecar adds to the containers and to later init containers", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "300m"), rl("cpu", "300m")))
			p.Spec.InitContainers = []corev1.Container{sidecar, ctr("init", rl("cpu", "400m"), nil)}
			return p
		}, false, rl("count/pods", "1", "pods", "1", "cpu", "600m", "requests.cpu", "600m", "memory", "64Mi", "requests.memory", "64Mi", "limits.cpu", "500m")},
		{"extended resources and hugepages", func() *corev1.Pod {
			return testPod(
				"p",
				ctr(
					"c",
					rl("example.com/gpu", "2", "hugepages-2Mi", "4Mi"),
					rl("example.com/gpu", "2", "hugepages-2Mi", "4Mi"),
				),
			)
		}, false, rl("count/pods", "1", "pods", "1", "requests.example.com/gpu", "2", "hugepages-2Mi", "4Mi", "requests.hugepages-2Mi", "4Mi")},
		{"overhead adds to requests and to set limits", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "100m", "memory", "10Mi"), rl("cpu", "200m")))
			p.Spec.Overhead = rl("cpu", "10m", "memory", "1Mi")
			return p
		}, false, rl("count/pods", "1", "pods", "1", "cpu", "110m", "requests.cpu", "110m", "memory", "11Mi", "requests.memory", "11Mi", "limits.cpu", "210m")},
		{"pod-level resources override the containers", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "100m"), nil))
			p.Spec.Resources = &corev1.ResourceRequirements{
				Requests: rl("cpu", "1"),
				Limits:   rl("cpu", "2"),
			}
			return p
		}, true, rl("count/pods", "1", "pods", "1", "cpu", "1", "requests.cpu", "1", "limits.cpu", "2")},
		{"pod-level resources ignored with the gate off", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "100m"), nil))
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "1")}
			return p
		}, false, rl("count/pods", "1", "pods", "1", "cpu", "100m", "requests.cpu", "100m")},
		{"a resize the kubelet allocated counts when larger", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "100m"), nil))
			p.Status.ContainerStatuses = []corev1.ContainerStatus{
				{Name: "c", AllocatedResources: rl("cpu", "300m")},
			}
			return p
		}, false, rl("count/pods", "1", "pods", "1", "cpu", "300m", "requests.cpu", "300m")},
		{"a resize the kubelet actuated counts when larger", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "100m"), rl("cpu", "100m")))
			p.Status.ContainerStatuses = []corev1.ContainerStatus{
				{Name: "c", Resources: actuated("300m", "400m")}}
			return p
		}, false, rl("count/pods", "1", "pods", "1", "cpu", "300m", "requests.cpu", "300m",
			"limits.cpu", "400m")},
		{"an infeasible resize counts what was allocated, not the spec", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "1"), nil))
			p.Status.ContainerStatuses = []corev1.ContainerStatus{
				{Name: "c", AllocatedResources: rl("cpu", "500m")}}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending,
				Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}
			return p
		}, false, rl("count/pods", "1", "pods", "1", "cpu", "500m", "requests.cpu", "500m")},
		{"a sidecar's resize the kubelet allocated counts", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "300m"), nil))
			p.Spec.InitContainers = []corev1.Container{sidecar}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{
				{Name: "side", AllocatedResources: rl("cpu", "400m")}}
			return p
		}, false, rl("count/pods", "1", "pods", "1", "cpu", "700m", "requests.cpu", "700m",
			"memory", "64Mi", "requests.memory", "64Mi", "limits.cpu", "200m")},
		{"a sidecar's resize the kubelet actuated counts", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "300m"), nil))
			p.Spec.InitContainers = []corev1.Container{sidecar}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{
				{Name: "side", Resources: actuated("400m", "500m")}}
			return p
		}, false, rl("count/pods", "1", "pods", "1", "cpu", "700m", "requests.cpu", "700m",
			"memory", "64Mi", "requests.memory", "64Mi", "limits.cpu", "500m")},
		{"a succeeded pod counts in count/pods only", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "1"), nil))
			p.Status.Phase = corev1.PodSucceeded
			return p
		}, false, rl("count/pods", "1")},
		{"a failed pod counts in count/pods only", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "1"), nil))
			p.Status.Phase = corev1.PodFailed
			return p
		}, false, rl("count/pods", "1")},
		{"a pod past its deletion grace period stops counting", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "1"), nil))
			p.DeletionTimestamp = &metav1.Time{Time: epoch.Add(-time.Minute)}
			p.DeletionGracePeriodSeconds = ptr.To[int64](30)
			return p
		}, false, rl("count/pods", "1")},
		{"a pod within its deletion grace period still counts", func() *corev1.Pod {
			p := testPod("p", ctr("c", rl("cpu", "1"), nil))
			p.DeletionTimestamp = &metav1.Time{Time: epoch}
			p.DeletionGracePeriodSeconds = ptr.To[int64](30)
			return p
		}, false, rl("count/pods", "1", "pods", "1", "cpu", "1", "requests.cpu", "1")},
	}
	clk := clocktesting.NewFakePassiveClock(epoch)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkList(t, "usage", podUsage(cached(t, tt.pod()), clk, tt.podLevel), tt.want)
		})
	}
}

func TestPodScopes(t *testing.T) {
	be := testPod("besteffort", ctr("c", nil, nil))
	burst := testPod("burstable", ctr("c", rl("cpu", "1"), nil))
	qosReported := testPod("reported", ctr("c", rl("cpu", "1"), nil))
	qosReported.Status.QOSClass = corev1.PodQOSBestEffort
	term := testPod("terminating", ctr("c", nil, nil))
	term.Spec.ActiveDeadlineSeconds = ptr.To[int64](10)
	prio := testPod("priority", ctr("c", nil, nil))
	prio.Spec.PriorityClassName = "high"
	xns := testPod("xns", ctr("c", nil, nil))
	xns.Spec.Affinity = &corev1.Affinity{
		PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{
					Weight: 1,
					PodAffinityTerm: corev1.PodAffinityTerm{
						NamespaceSelector: &metav1.LabelSelector{},
					},
				},
			},
		},
	}
	exists := func(s corev1.ResourceQuotaScope) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{
			ScopeName: s,
			Operator:  corev1.ScopeSelectorOpExists,
		}
	}
	pc := func(op corev1.ScopeSelectorOperator, v ...string) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{
			ScopeName: corev1.ResourceQuotaScopePriorityClass,
			Operator:  op,
			Values:    v,
		}
	}
	tests := []struct {
		name string
		req  corev1.ScopedResourceSelectorRequirement
		want map[string]bool // pod name: in scope
	}{
		{
			"BestEffort",
			exists(corev1.ResourceQuotaScopeBestEffort),
			map[string]bool{"besteffort": true, "burstable": false, "reported": true},
		},
		{
			"NotBestEffort",
			exists(corev1.ResourceQuotaScopeNotBestEffort),
			map[string]bool{"besteffort": false, "burstable": true},
		},
		{
			"Terminating",
			exists(corev1.ResourceQuotaScopeTerminating),
			map[string]bool{"terminating": true, "besteffort": false},
		},
		{
			"NotTerminating",
			exists(corev1.ResourceQuotaScopeNotTerminating),
			map[string]bool{"terminating": false, "besteffort": true},
		},
		{
			"PriorityClass Exists",
			pc(corev1.ScopeSelectorOpExists),
			map[string]bool{"priority": true, "besteffort": false},
		},
		{
			"PriorityClass DoesNotExist",
			pc(corev1.ScopeSelectorOpDoesNotExist),
			map[string]bool{"priority": false, "besteffort": true},
		},
		{
			"PriorityClass In",
			pc(corev1.ScopeSelectorOpIn, "high", "low"),
			map[string]bool{"priority": true, "besteffort": false},
		},
		{
			"PriorityClass NotIn",
			pc(corev1.ScopeSelectorOpNotIn, "high"),
			map[string]bool{"priority": false, "besteffort": true},
		},
		{
			"CrossNamespacePodAffinity",
			exists(corev1.ResourceQuotaScopeCrossNamespacePodAffinity),
			map[string]bool{"xns": true, "besteffort": false},
		},
	}
	pods := map[string]*corev1.Pod{}
	for _, p := range []*corev1.Pod{be, burst, qosReported, term, prio, xns} {
		pods[p.Name] = p
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, want := range tt.want {
				got, err := podInScope(tt.req, cached(t, pods[name]))
				if err != nil || got != want {
					t.Errorf("pod %s: in scope %v, %v; want %v", name, got, err, want)
				}
			}
		})
	}
	if _, err := podInScope(pc("Bogus", "x"), cached(t, prio)); err == nil {
		t.Error("an unknown operator was accepted")
	}
}

func TestServiceUsage(t *testing.T) {
	ports := func(n int, nodePorts bool) []corev1.ServicePort {
		var out []corev1.ServicePort
		for i := range n {
			p := corev1.ServicePort{Port: int32(80 + i)}
			if nodePorts && i == 0 {
				p.NodePort = 30000
			}
			out = append(out, p)
		}
		return out
	}
	tests := []struct {
		name string
		spec corev1.ServiceSpec
		want corev1.ResourceList
	}{
		{"ClusterIP", corev1.ServiceSpec{Ports: ports(2, false)},
			rl(
				"services",
				"1",
				"count/services",
				"1",
				"services.loadbalancers",
				"0",
				"services.nodeports",
				"0",
			)},
		{
			"NodePort counts every port",
			corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: ports(3, false)},
			rl(
				"services",
				"1",
				"count/services",
				"1",
				"services.loadbalancers",
				"0",
				"services.nodeports",
				"3",
			),
		},
		{
			"LoadBalancer",
			corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports(2, false)},
			rl(
				"services",
				"1",
				"count/services",
				"1",
				"services.loadbalancers",
				"1",
				"services.nodeports",
				"2",
			),
		},
		{
			"LoadBalancer without node ports counts those allocated",
			corev1.ServiceSpec{
				Type:                          corev1.ServiceTypeLoadBalancer,
				AllocateLoadBalancerNodePorts: ptr.To(false),
				Ports:                         ports(2, true),
			},
			rl(
				"services",
				"1",
				"count/services",
				"1",
				"services.loadbalancers",
				"1",
				"services.nodeports",
				"1",
			),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkList(t, "usage", serviceUsage(&corev1.Service{Spec: tt.spec}), tt.want)
		})
	}
}

func TestPVCUsage(t *testing.T) {
	claim := func(class *string, annotation, size string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class},
		}
		if size != "" {
			c.Spec.Resources.Requests = rl("storage", size)
		}
		if annotation != "" {
			c.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: annotation}
		}
		return c
	}
	grown := claim(nil, "", "1Gi")
	grown.Status.AllocatedResources = rl("storage", "2Gi")
	tests := []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want corev1.ResourceList
	}{
		{
			"no class",
			claim(nil, "", "1Gi"),
			rl(
				"persistentvolumeclaims",
				"1",
				"count/persistentvolumeclaims",
				"1",
				"requests.storage",
				"1Gi",
			),
		},
		{
			"a class counts twice",
			claim(ptr.To("gold"), "", "1Gi"),
			rl(
				"persistentvolumeclaims",
				"1",
				"count/persistentvolumeclaims",
				"1",
				"requests.storage",
				"1Gi",
				"gold.storageclass.storage.k8s.io/persistentvolumeclaims",
				"1",
				"gold.storageclass.storage.k8s.io/requests.storage",
				"1Gi",
			),
		},
		{
			"the beta annotation wins over the spec",
			claim(ptr.To("gold"), "silver", "1Gi"),
			rl(
				"persistentvolumeclaims",
				"1",
				"count/persistentvolumeclaims",
				"1",
				"requests.storage",
				"1Gi",
				"silver.storageclass.storage.k8s.io/persistentvolumeclaims",
				"1",
				"silver.storageclass.storage.k8s.io/requests.storage",
				"1Gi",
			),
		},
		{
			"a fractional request rounds up to a byte",
			claim(nil, "", "1500m"),
			rl(
				"persistentvolumeclaims",
				"1",
				"count/persistentvolumeclaims",
				"1",
				"requests.storage",
				"2",
			),
		},
		{
			"a larger allocation counts",
			grown,
			rl(
				"persistentvolumeclaims",
				"1",
				"count/persistentvolumeclaims",
				"1",
				"requests.storage",
				"2Gi",
			),
		},
		{
			"no request",
			claim(nil, "", ""),
			rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkList(t, "usage", pvcUsage(tt.pvc), tt.want)
		})
	}
	in := []corev1.ResourceName{
		"gold.storageclass.storage.k8s.io/requests.storage",
		"requests.storage",
		"count/persistentvolumeclaims",
		"pods",
		"x.storageclass.storage.k8s.io/other",
	}
	if got := pvcMatching(in); len(got) != 3 {
		t.Errorf("pvcMatching(%v) = %v, want the first three", in, got)
	}
}

func TestQuantityArithmetic(t *testing.T) {
	checkList(
		t,
		"add",
		addLists(rl("cpu", "500m", "pods", "1"), rl("cpu", "1", "memory", "1Gi")),
		rl("cpu", "1500m", "pods", "1", "memory", "1Gi"),
	)
	if !sameLists(rl("cpu", "1"), rl("cpu", "1000m")) ||
		sameLists(rl("cpu", "1"), rl("cpu", "1", "pods", "0")) ||
		sameLists(rl("cpu", "1"), rl("memory", "1")) {
		t.Error("sameLists")
	}
	checkList(
		t,
		"mask",
		maskList(rl("cpu", "1", "pods", "2"), []corev1.ResourceName{"pods", "secrets"}),
		rl("pods", "2"),
	)
	checkList(
		t,
		"max",
		maxLists(rl("cpu", "1"), rl("cpu", "2", "memory", "1")),
		rl("cpu", "2", "memory", "1"),
	)
}

func TestClaimUsage(t *testing.T) {
	exact := func(class string, mode resourcev1.DeviceAllocationMode, n int64) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{
			Name: "r",
			Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: class,
				AllocationMode:  mode,
				Count:           n,
			},
		}
	}
	claim := &resourcev1.ResourceClaim{
		Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
				exact("gpu", resourcev1.DeviceAllocationModeExactCount, 2),
				exact("gpu", resourcev1.DeviceAllocationModeExactCount, 1),
				exact("nic", resourcev1.DeviceAllocationModeAll, 0),
				{Name: "either", FirstAvailable: []resourcev1.DeviceSubRequest{
					{
						Name:            "a",
						DeviceClassName: "fpga",
						AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
						Count:           1,
					},
					{
						Name:            "b",
						DeviceClassName: "fpga",
						AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
						Count:           3,
					},
					{
						Name:            "c",
						DeviceClassName: "gpu",
						AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
						Count:           1,
					},
				}},
			}},
		},
	}
	checkList(t, "usage", claimUsage(claim), rl(
		"count/resourceclaims.resource.k8s.io",
		"1",
		"gpu.deviceclass.resource.k8s.io/devices",
		"4",
		"nic.deviceclass.resource.k8s.io/devices",
		"32",
		"fpga.deviceclass.resource.k8s.io/devices",
		"3",
	))
	e := claimEvaluator(nil)
	in := []corev1.ResourceName{
		"count/resourceclaims.resource.k8s.io",
		"gpu.deviceclass.resource.k8s.io/devices",
		"pods",
	}
	if got := e.matching(in); len(got) != 2 {
		t.Errorf("matching(%v) = %v, want the first two", in, got)
	}
}

func TestPodLevelBestEffort(t *testing.T) {
	p := testPod("p", ctr("c", nil, nil))
	p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "1")}
	p = cached(t, p)
	be := corev1.ScopedResourceSelectorRequirement{
		ScopeName: corev1.ResourceQuotaScopeBestEffort,
		Operator:  corev1.ScopeSelectorOpExists,
	}
	if in, _ := podScope(true)(be, p); in {
		t.Error("pod-level requests honoured: the pod is not BestEffort")
	}
	if in, _ := podScope(false)(be, p); !in {
		t.Error("pod-level resources off: a pod whose containers ask nothing is BestEffort")
	}
}

// TestCrossNamespaceAffinityScope: a pod is in the CrossNamespacePodAffinity
// scope when any of its affinity or anti-affinity terms, required or
// preferred, names namespaces or a namespace selector.
func TestCrossNamespaceAffinityScope(t *testing.T) {
	xns := corev1.ScopedResourceSelectorRequirement{
		ScopeName: corev1.ResourceQuotaScopeCrossNamespacePodAffinity,
		Operator:  corev1.ScopeSelectorOpExists,
	}
	byNames := corev1.PodAffinityTerm{Namespaces: []string{"other"}, TopologyKey: "zone"}
	bySelector := corev1.PodAffinityTerm{NamespaceSelector: &metav1.LabelSelector{},
		TopologyKey: "zone"}
	local := corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{}, TopologyKey: "zone"}
	const affinity, anti = false, true
	const required, preferred = false, true
	// with is an affinity (or anti-affinity) of the one term, required
	// (or preferred).
	with := func(isAnti, isPreferred bool, term corev1.PodAffinityTerm) *corev1.Affinity {
		var req []corev1.PodAffinityTerm
		var pref []corev1.WeightedPodAffinityTerm
		if isPreferred {
			pref = []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: term}}
		} else {
			req = []corev1.PodAffinityTerm{term}
		}
		if isAnti {
			return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  req,
				PreferredDuringSchedulingIgnoredDuringExecution: pref,
			}}
		}
		return &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution:  req,
			PreferredDuringSchedulingIgnoredDuringExecution: pref,
		}}
	}
	tests := []struct {
		name     string
		affinity *corev1.Affinity
		want     bool
	}{
		{"no affinity", nil, false},
		{"same-namespace terms", with(affinity, required, local), false},
		{"affinity required, namespaces", with(affinity, required, byNames), true},
		{"affinity required, namespace selector", with(affinity, required, bySelector), true},
		{"affinity preferred, namespaces", with(affinity, preferred, byNames), true},
		{"affinity preferred, namespace selector", with(affinity, preferred, bySelector), true},
		{"anti-affinity required, namespaces", with(anti, required, byNames), true},
		{"anti-affinity required, namespace selector", with(anti, required, bySelector), true},
		{"anti-affinity preferred, namespaces", with(anti, preferred, byNames), true},
		{"anti-affinity preferred, namespace selector", with(anti, preferred, bySelector), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPod("p", ctr("c", nil, nil))
			p.Spec.Affinity = tt.affinity
			if got, err := podInScope(xns, cached(t, p)); err != nil || got != tt.want {
				t.Errorf("in scope %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
