//go:build integration

package differential_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/resourcequota"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// quotaOnce runs an Act step once per namespace (each side has its own).
type quotaOnce struct {
	mu   sync.Mutex
	done map[string]bool
}

// do runs f for ns unless it already succeeded there.
func (o *quotaOnce) do(ns string, f func() error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done[ns] {
		return nil
	}
	if err := f(); err != nil {
		return err
	}
	if o.done == nil {
		o.done = map[string]bool{}
	}
	o.done[ns] = true
	return nil
}

func quotaHard(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func quotaList(kv ...string) corev1.ResourceList { return quotaHard(kv...) }

// quotaObserver lists the namespace's ResourceQuotas (spec and status) and
// closes with a summary of the namespace's event reasons
// ("involvedObject.kind reason", sorted, without repeats: counts and
// timing of events are not deterministic).
func quotaObserver(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
	l, err := cs.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for i := range l.Items {
		l.Items[i].Kind = "ResourceQuota"
		out = append(out, &l.Items[i])
	}
	sum, err := differential.EventSummary(ctx, cs, ns, nil)
	if err != nil {
		return nil, err
	}
	return append(out, sum), nil
}

// quotaUsed returns status.used[name] of the named quota in a normalised
// state ("" when absent).
func quotaUsed(state []map[string]any, quota, name string) string {
	for _, o := range state {
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] != "ResourceQuota" || md["name"] != quota {
			continue
		}
		st, _ := o["status"].(map[string]any)
		used, _ := st["used"].(map[string]any)
		v, _ := used[name].(string)
		return v
	}
	return ""
}

// quotaStatusHas reports whether the quota's status.hard names name.
func quotaStatusHas(state []map[string]any, quota, name string) bool {
	for _, o := range state {
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] != "ResourceQuota" || md["name"] != quota {
			continue
		}
		st, _ := o["status"].(map[string]any)
		hard, _ := st["hard"].(map[string]any)
		_, ok := hard[name]
		return ok
	}
	return false
}

func getQuota(ctx context.Context, cs kubernetes.Interface, ns, name string) (*corev1.ResourceQuota, error) {
	return cs.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
}

// TestResourceQuotaCounts: object counts of every kind the controller
// measures (core aliases, services by type, claims by storage class,
// count/<resource>.<group> of discovered resources, DRA claims by device
// class, and a name no
// evaluator knows), then replenishment: a ConfigMap and the LoadBalancer
// Service are deleted and a Secret created (admission charges it), and a
// second quota's limits change (status.hard follows, status.used is
// masked to the new limits), and a quota is made while the controller
// runs.
func TestResourceQuotaCounts(t *testing.T) {
	var once, change quotaOnce
	res := compare(t, differential.Scenario{
		Name: "resource quota object counts", Controller: resourcequota.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for _, n := range []string{"cm-a", "cm-b"} {
				if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-a"}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			port := func(n int32) corev1.ServicePort {
				return corev1.ServicePort{Name: fmt.Sprintf("p%d", n), Port: n, Protocol: corev1.ProtocolTCP}
			}
			svcs := []*corev1.Service{
				{ObjectMeta: metav1.ObjectMeta{Name: "svc-cluster"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{port(80)}}},
				{ObjectMeta: metav1.ObjectMeta{Name: "svc-nodeport"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{port(80), port(443)}}},
				{ObjectMeta: metav1.ObjectMeta{Name: "svc-lb"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{port(80)}}},
				{ObjectMeta: metav1.ObjectMeta{Name: "svc-lb-no-np"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
					AllocateLoadBalancerNodePorts: ptr.To(false), Ports: []corev1.ServicePort{port(80), port(81)}}},
			}
			for _, s := range svcs {
				if _, err := cs.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			pvc := func(name, class string, annotated bool, size string) *corev1.PersistentVolumeClaim {
				c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: quotaList("storage", size)},
				}}
				switch {
				case annotated:
					c.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: class}
				case class != "":
					c.Spec.StorageClassName = ptr.To(class)
				}
				return c
			}
			for _, c := range []*corev1.PersistentVolumeClaim{
				pvc("gold-1", "gold", false, "1Gi"), pvc("gold-2", "gold", true, "1500M"), pvc("plain", "", false, "2Gi"),
			} {
				if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			labels := map[string]string{"app": "x"}
			tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod("x", nil).Spec}
			if _, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			jt := tmpl.DeepCopy()
			jt.Spec.RestartPolicy = corev1.RestartPolicyNever
			jt.Labels = nil
			if _, err := cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j"},
				Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: *jt}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			for _, n := range []string{"l-a", "l-b"} {
				if _, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			claims := []*resourcev1.ResourceClaim{
				{ObjectMeta: metav1.ObjectMeta{Name: "claim-exact"}, Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
					{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2}},
				}}}},
				{ObjectMeta: metav1.ObjectMeta{Name: "claim-either"}, Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
					{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
						{Name: "one", DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
						{Name: "three", DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 3},
					}},
				}}}},
			}
			for _, c := range claims {
				if _, err := cs.ResourceV1().ResourceClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			quotas := []*corev1.ResourceQuota{
				{ObjectMeta: metav1.ObjectMeta{Name: "claims"}, Spec: corev1.ResourceQuotaSpec{Hard: quotaHard(
					"count/resourceclaims.resource.k8s.io", "5", "gpu.deviceclass.resource.k8s.io/devices", "10",
				)}},
				{ObjectMeta: metav1.ObjectMeta{Name: "objects"}, Spec: corev1.ResourceQuotaSpec{Hard: quotaHard(
					"configmaps", "10", "count/configmaps", "10", "secrets", "10", "resourcequotas", "5",
					"replicationcontrollers", "5", "count/deployments.apps", "3", "count/jobs.batch", "3",
					"count/widgets.example.com", "4",
				)}},
				{ObjectMeta: metav1.ObjectMeta{Name: "network-storage"}, Spec: corev1.ResourceQuotaSpec{Hard: quotaHard(
					"services", "10", "count/services", "10", "services.loadbalancers", "3", "services.nodeports", "10",
					"persistentvolumeclaims", "10", "count/persistentvolumeclaims", "10", "requests.storage", "100Gi",
					"gold.storageclass.storage.k8s.io/requests.storage", "50Gi", "gold.storageclass.storage.k8s.io/persistentvolumeclaims", "5",
					"silver.storageclass.storage.k8s.io/persistentvolumeclaims", "5",
				)}},
				{ObjectMeta: metav1.ObjectMeta{Name: "changing"}, Spec: corev1.ResourceQuotaSpec{Hard: quotaHard(
					"secrets", "10", "configmaps", "10",
				)}},
			}
			for _, q := range quotas {
				if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		}),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			objs, err := getQuota(ctx, cs, ns, "objects")
			if err != nil {
				return err
			}
			net, err := getQuota(ctx, cs, ns, "network-storage")
			if err != nil {
				return err
			}
			// Only once the controller has measured both quotas.
			if _, ok := objs.Status.Used["count/deployments.apps"]; !ok {
				return nil
			}
			if _, ok := net.Status.Used["services.nodeports"]; !ok {
				return nil
			}
			if err := once.do(ns, func() error {
				if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "cm-b", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				if err := cs.CoreV1().Services(ns).Delete(ctx, "svc-lb", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-late"}}, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					return err
				}
				// A quota made while the controller runs (its priority queue).
				_, err = cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "late"},
					Spec: corev1.ResourceQuotaSpec{Hard: quotaHard("configmaps", "5", "count/leases.coordination.k8s.io", "5")}}, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return nil
				}
				return err
			}); err != nil {
				return err
			}
			return change.do(ns, func() error {
				q, err := getQuota(ctx, cs, ns, "changing")
				if err != nil {
					return err
				}
				q.Spec.Hard = quotaHard("configmaps", "20", "count/leases.coordination.k8s.io", "5")
				_, err = cs.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{})
				return err
			})
		},
		Observe: quotaObserver,
		Settled: func(state []map[string]any) bool {
			return quotaUsed(state, "objects", "configmaps") == "1" && quotaUsed(state, "objects", "secrets") == "2" &&
				quotaUsed(state, "network-storage", "services.loadbalancers") == "1" &&
				quotaUsed(state, "changing", "count/leases.coordination.k8s.io") == "2" &&
				quotaUsed(state, "late", "count/leases.coordination.k8s.io") == "2" &&
				!quotaStatusHas(state, "changing", "secrets")
		},
	})
	quotaExpect(t, res.Native, "objects", map[string]string{
		"count/deployments.apps": "1", "count/jobs.batch": "1", "resourcequotas": "5", "replicationcontrollers": "0",
		"count/widgets.example.com": "", // no evaluator: never written
	})
	quotaExpect(t, res.Native, "network-storage", map[string]string{
		"services.nodeports": "2", "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "2",
		"silver.storageclass.storage.k8s.io/persistentvolumeclaims": "0",
	})
	quotaExpect(t, res.Native, "changing", map[string]string{"secrets": "", "configmaps": "1"})
	quotaExpect(t, res.Native, "claims", map[string]string{"count/resourceclaims.resource.k8s.io": "2", "gpu.deviceclass.resource.k8s.io/devices": "5"})
}

// quotaPod is a pod of one container with the given requests and limits.
func quotaPod(name string, req, lim corev1.ResourceList) *corev1.Pod {
	p := pod(name, nil)
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: req, Limits: lim}
	return p
}

// TestResourceQuotaCompute: compute usage of pods with mixed requests and
// limits (init containers, a sidecar, an extended resource, pod overhead
// is not set), scopes (BestEffort, NotBestEffort, Terminating,
// NotTerminating, PriorityClass In/NotIn/Exists/DoesNotExist,
// CrossNamespacePodAffinity), and replenishment when a pod turns
// Succeeded and when one is deleted. The pods exist before the quotas (so
// admission does not require limits of them).
func TestResourceQuotaCompute(t *testing.T) {
	var once quotaOnce
	res := compare(t, differential.Scenario{
		Name: "resource quota compute and scopes", Controller: resourcequota.Name,
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
				ObjectMeta: metav1.ObjectMeta{Name: ns + "-high"}, Value: 1000,
			}, metav1.CreateOptions{}); err != nil {
				return err
			}
			guaranteed := quotaList("cpu", "500m", "memory", "256Mi")
			burst := quotaPod("burstable", quotaList("cpu", "100m", "memory", "64Mi", "ephemeral-storage", "1Gi", "example.com/foo", "2"),
				quotaList("cpu", "1", "memory", "128Mi", "example.com/foo", "2"))
			burst.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: quotaList("cpu", "2", "memory", "32Mi"), Limits: quotaList("cpu", "2", "memory", "64Mi")}}}
			sidecar := quotaPod("sidecar", quotaList("cpu", "300m", "memory", "128Mi"), quotaList("cpu", "300m", "memory", "128Mi"))
			sidecar.Spec.InitContainers = []corev1.Container{
				{Name: "side", Image: "registry.k8s.io/pause:3.10", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
					Resources: corev1.ResourceRequirements{Requests: quotaList("cpu", "200m", "memory", "64Mi"), Limits: quotaList("cpu", "200m", "memory", "64Mi")}},
				{Name: "init", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: quotaList("cpu", "400m", "memory", "16Mi"), Limits: quotaList("cpu", "400m", "memory", "16Mi")}},
			}
			terminating := quotaPod("terminating", quotaList("cpu", "100m", "memory", "100Mi"), nil)
			terminating.Spec.ActiveDeadlineSeconds = ptr.To[int64](600)
			priority := quotaPod("priority", quotaList("cpu", "150m"), nil)
			priority.Spec.PriorityClassName = ns + "-high"
			xns := pod("cross-ns", nil)
			xns.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "y"}}, TopologyKey: "kubernetes.io/hostname", Namespaces: []string{"other"},
			}}}}
			pods := []*corev1.Pod{
				quotaPod("guaranteed", guaranteed, guaranteed), burst, sidecar, pod("besteffort", nil),
				quotaPod("done", quotaList("cpu", "1", "memory", "1Gi"), nil), quotaPod("gone", quotaList("cpu", "250m"), nil),
				terminating, priority, xns,
			}
			for _, p := range pods {
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			scoped := func(name string, scopes []corev1.ResourceQuotaScope, sel []corev1.ScopedResourceSelectorRequirement, hard ...string) *corev1.ResourceQuota {
				q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: quotaHard(hard...), Scopes: scopes}}
				if sel != nil {
					q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: sel}
				}
				return q
			}
			pc := func(op corev1.ScopeSelectorOperator, values ...string) []corev1.ScopedResourceSelectorRequirement {
				return []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: op, Values: values}}
			}
			quotas := []*corev1.ResourceQuota{
				scoped("compute", nil, nil, "pods", "20", "count/pods", "20", "cpu", "20", "memory", "20Gi",
					"requests.cpu", "20", "requests.memory", "20Gi", "limits.cpu", "40", "limits.memory", "40Gi",
					"requests.ephemeral-storage", "20Gi", "limits.ephemeral-storage", "20Gi", "requests.example.com/foo", "10"),
				scoped("besteffort", []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}, nil, "pods", "20", "count/pods", "20"),
				scoped("notbesteffort", []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort}, nil, "pods", "20", "requests.cpu", "20", "limits.memory", "20Gi"),
				scoped("terminating", []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeTerminating}, nil, "pods", "20", "requests.cpu", "20", "requests.memory", "20Gi"),
				scoped("notterminating", []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}, nil, "pods", "20", "requests.cpu", "20"),
				scoped("priority-in", nil, pc(corev1.ScopeSelectorOpIn, ns+"-high"), "pods", "20", "requests.cpu", "20"),
				scoped("priority-notin", nil, pc(corev1.ScopeSelectorOpNotIn, ns+"-high"), "pods", "20"),
				scoped("priority-exists", nil, pc(corev1.ScopeSelectorOpExists), "pods", "20"),
				scoped("priority-absent", nil, pc(corev1.ScopeSelectorOpDoesNotExist), "pods", "20"),
				scoped("cross-ns", nil, []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopeCrossNamespacePodAffinity, Operator: corev1.ScopeSelectorOpExists}}, "pods", "20"),
			}
			for _, q := range quotas {
				if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("quota %s: %w", q.Name, err)
				}
			}
			return nil
		}),
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			q, err := getQuota(ctx, cs, ns, "compute")
			if err != nil {
				return err
			}
			if _, ok := q.Status.Used["requests.cpu"]; !ok {
				return nil // not measured yet
			}
			return once.do(ns, func() error {
				p, err := cs.CoreV1().Pods(ns).Get(ctx, "done", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if err := setPhase(ctx, cs, p, corev1.PodSucceeded, 0); err != nil {
					return err
				}
				if err := cs.CoreV1().Pods(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				return nil
			})
		},
		Observe: quotaObserver,
		Settled: func(state []map[string]any) bool {
			return quotaUsed(state, "compute", "pods") == "7" && quotaUsed(state, "compute", "count/pods") == "8" &&
				quotaUsed(state, "notterminating", "pods") == "6"
		},
		Cleanup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			err := cs.SchedulingV1().PriorityClasses().Delete(ctx, ns+"-high", metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				err = nil
			}
			if perr := deletePods(ctx, cs, ns); perr != nil && err == nil {
				err = perr
			}
			return err
		},
	})
	quotaExpect(t, res.Native, "compute", map[string]string{
		// 500m + max(100m, init 2) + max(300m+200m sidecar, 400m init+200m sidecar) + 100m + 150m
		"requests.cpu": "3350m", "cpu": "3350m", "limits.cpu": "3100m", "requests.example.com/foo": "2",
		"requests.ephemeral-storage": "1Gi", "limits.ephemeral-storage": "0",
	})
	quotaExpect(t, res.Native, "besteffort", map[string]string{"pods": "2"})
	quotaExpect(t, res.Native, "terminating", map[string]string{"pods": "1", "requests.cpu": "100m"})
	quotaExpect(t, res.Native, "priority-in", map[string]string{"pods": "1", "requests.cpu": "150m"})
	quotaExpect(t, res.Native, "priority-notin", map[string]string{"pods": "6"})
	quotaExpect(t, res.Native, "cross-ns", map[string]string{"pods": "1"})
}

// quotaExpect checks values of a quota's status.used ("" for absent): the
// scenario did exercise what it names, whatever both sides agree on.
func quotaExpect(t *testing.T, state []map[string]any, quota string, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got := quotaUsed(state, quota, name); got != w {
			t.Errorf("quota %s: status.used[%s] = %q, want %q", quota, name, got, w)
		}
	}
}

// The custom resource of TestResourceQuotaCustomResource. Its group is
// fixed (quota names carry it, as map keys, which the normaliser does not
// rewrite), so both sides share the CRD; the objects are namespaced.
var (
	quotaCRDs    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	quotaWidgets = schema.GroupVersionResource{Group: "quota.ctrlhost.example.com", Version: "v1", Resource: "widgets"}
)

// ensureWidgetCRD creates the widgets CRD unless it exists, and waits
// until discovery serves it.
func ensureWidgetCRD(ctx context.Context, dyn dynamic.Interface, cs kubernetes.Interface) error {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": quotaWidgets.Resource + "." + quotaWidgets.Group},
		"spec": map[string]any{
			"group": quotaWidgets.Group, "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	if _, err := dyn.Resource(quotaCRDs).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		l, err := cs.Discovery().ServerResourcesForGroupVersion(quotaWidgets.GroupVersion().String())
		if err == nil {
			for _, r := range l.APIResources {
				if r.Name == quotaWidgets.Resource {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for discovery to serve %v: %w (last error: %v)", quotaWidgets, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func widget(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": quotaWidgets.GroupVersion().String(), "kind": "Widget", "metadata": map[string]any{"name": name},
	}}
}

// TestResourceQuotaCustomResource: a custom resource found by discovery is
// counted as count/<resource>.<group> through a metadata informer, and
// deleting one of its objects replenishes the quota.
func TestResourceQuotaCustomResource(t *testing.T) {
	e := env(t)
	dyn, err := dynamic.NewForConfig(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := dyn.Resource(quotaCRDs).Delete(ctx, quotaWidgets.Resource+"."+quotaWidgets.Group, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the widgets CRD: %v", err)
		}
	})
	name := corev1.ResourceName("count/" + quotaWidgets.Resource + "." + quotaWidgets.Group)
	var once quotaOnce
	res := compare(t, differential.Scenario{
		Name: "resource quota over a custom resource", Controller: resourcequota.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := ensureWidgetCRD(ctx, dyn, cs); err != nil {
				return err
			}
			for _, n := range []string{"w-a", "w-b", "w-c"} {
				if _, err := dyn.Resource(quotaWidgets).Namespace(ns).Create(ctx, widget(n), metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			_, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "custom"},
				Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{name: resource.MustParse("10")}}}, metav1.CreateOptions{})
			return err
		},
		Act: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			q, err := getQuota(ctx, cs, ns, "custom")
			if err != nil {
				return err
			}
			if _, ok := q.Status.Used[name]; !ok {
				return nil // not measured yet
			}
			return once.do(ns, func() error {
				err := dyn.Resource(quotaWidgets).Namespace(ns).Delete(ctx, "w-b", metav1.DeleteOptions{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			})
		},
		Observe: quotaObserver,
		Settled: func(state []map[string]any) bool { return quotaUsed(state, "custom", string(name)) == "2" },
	})
	quotaExpect(t, res.Native, "custom", map[string]string{string(name): "2"})
}
