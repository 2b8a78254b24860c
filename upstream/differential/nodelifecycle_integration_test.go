//go:build integration

package differential_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/nodelifecycle"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/testenv"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
	"github.com/ctrlhost/ctrlhost/upstream/kcm"
)

// The node lifecycle settings both sides get: short, so that a node goes
// silent within seconds.
const (
	nlMonitorPeriod = time.Second
	nlGracePeriod   = 4 * time.Second
	// nlRenewFor is how long the scenario renews the failing node's Lease.
	nlRenewFor = 3 * time.Second
)

// deletingAnnotation marks, in what Observe returns, a pod whose deletion
// has begun (the deletion timestamp itself is normalised away; without a
// kubelet the pod stays).
const deletingAnnotation = "differential/deleting"

// nodeLifecycleRunner is runner with the node lifecycle controller's
// monitor and grace periods shortened on both sides.
func nodeLifecycleRunner(t *testing.T, e *testenv.Env) differential.Runner {
	r := runner(t, e)
	descriptors := r.Descriptors
	r.Descriptors = func(side differential.Side) []descriptor.Descriptor {
		if side == differential.Native {
			o := nodelifecycle.NewOptions()
			o.NodeMonitorPeriod = nlMonitorPeriod
			o.NodeMonitorGracePeriod = nlGracePeriod
			ds := slices.DeleteFunc(descriptors(side), func(d descriptor.Descriptor) bool {
				return d.Name() == nodelifecycle.Name
			})
			return append(ds, nodelifecycle.Descriptor(o))
		}
		o, err := kcm.NewOptions()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := o.Config(manager.NewOptions())
		if err != nil {
			t.Fatal(err)
		}
		cfg.NodeLifecycleController.NodeMonitorPeriod = metav1.Duration{Duration: nlMonitorPeriod}
		cfg.NodeLifecycleController.NodeMonitorGracePeriod = metav1.Duration{
			Duration: nlGracePeriod}
		ds, err := kcm.Descriptors(kcm.Config{Component: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	return r
}

// nodeScenario is two nodes of one zone (named after the namespace, so
// that no other node shares it), each with a Lease, and pods on the first;
// Act renews the second node's Lease throughout and the first's for
// nlRenewFor after the controller starts, then lets it lapse.
type nodeScenario struct {
	pods func(node string) []*corev1.Pod

	mu      sync.Mutex
	started map[string]time.Time // first Act, by namespace
}

func (s *nodeScenario) setup(ctx context.Context, cs kubernetes.Interface, ns string) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: corev1.NamespaceNodeLease}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	now := metav1.Now()
	for _, name := range []string{ns + "-a", ns + "-b"} {
		node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"differential": ns,
				corev1.LabelTopologyZone: ns}}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		node.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status", LastHeartbeatTime: now,
			LastTransitionTime: now}}
		for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure,
			corev1.NodeDiskPressure, corev1.NodePIDPressure} {
			node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
				Type: c, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficient",
				LastHeartbeatTime: now, LastTransitionTime: now})
		}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node,
			metav1.UpdateOptions{}); err != nil {
			return err
		}
		if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx,
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name),
					LeaseDurationSeconds: ptr.To[int32](4),
					RenewTime:            &metav1.MicroTime{Time: now.Time}}},
			metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for _, p := range s.pods(ns + "-a") {
		created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status.Phase = corev1.PodRunning
		created.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue,
				LastTransitionTime: now}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created,
			metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// act renews the Leases as the kubelets would.
func (s *nodeScenario) act(ctx context.Context, cs kubernetes.Interface, ns string) error {
	s.mu.Lock()
	if s.started == nil {
		s.started = map[string]time.Time{}
	}
	start, ok := s.started[ns]
	if !ok {
		start = time.Now()
		s.started[ns] = start
	}
	s.mu.Unlock()
	names := []string{ns + "-b"}
	if time.Since(start) < nlRenewFor {
		names = append(names, ns+"-a")
	}
	leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	for _, name := range names {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil &&
			!apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// observe returns the scenario's nodes (taints sorted: the NoSchedule and
// NoExecute taints are added by two workers, in either order), its pods
// (marked when being deleted) and the events on its pods.
func (s *nodeScenario) observe(ctx context.Context, cs kubernetes.Interface,
	ns string) ([]runtime.Object, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx,
		metav1.ListOptions{LabelSelector: "differential=" + ns})
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for i := range nodes.Items {
		n := &nodes.Items[i]
		n.Kind = "Node"
		slices.SortFunc(n.Spec.Taints, func(a, b corev1.Taint) int {
			return strings.Compare(a.Key+":"+string(a.Effect), b.Key+":"+string(b.Effect))
		})
		out = append(out, n)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		p.Kind = "Pod"
		if p.DeletionTimestamp != nil {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[deletingAnnotation] = "true"
		}
		out = append(out, p)
	}
	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, e := range events.Items {
		key := fmt.Sprintf("%s-%s-%s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason)
		if seen[key] {
			continue
		}
		seen[key] = true
		summary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(key)},
			Data: map[string]string{"type": e.Type, "reason": e.Reason, "message": e.Message,
				"source": e.Source.Component}}
		summary.Kind = "Event"
		out = append(out, summary)
	}
	return out, nil
}

func (s *nodeScenario) cleanup(ctx context.Context, cs kubernetes.Interface, ns string) error {
	for _, name := range []string{ns + "-a", ns + "-b"} {
		if err := cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil &&
			!apierrors.IsNotFound(err) {
			return err
		}
		if err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name,
			metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return deletePods(ctx, cs, ns)
}

// nodeState finds the normalised object of kind named name in state.
func nodeState(state []map[string]any, kind, name string) map[string]any {
	for _, o := range state {
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] == kind && md != nil && md["name"] == name {
			return o
		}
	}
	return nil
}

// unreachableTainted holds when the failing node carries both unreachable
// taints.
func unreachableTainted(state []map[string]any) bool {
	n := nodeState(state, "Node", "<ns>-a")
	if n == nil {
		return false
	}
	taints := fmt.Sprint(n["spec"])
	return strings.Contains(taints, "effect:NoExecute key:node.kubernetes.io/unreachable") &&
		strings.Contains(taints, "effect:NoSchedule key:node.kubernetes.io/unreachable")
}

// podNotReady holds when the named pod's Ready condition is False.
func podNotReady(state []map[string]any, name string) bool {
	p := nodeState(state, "Pod", name)
	return p != nil && strings.Contains(fmt.Sprint(p["status"]),
		"status:False type:Ready")
}

func podDeleting(state []map[string]any, name string) bool {
	p := nodeState(state, "Pod", name)
	return p != nil && strings.Contains(fmt.Sprint(p["metadata"]), deletingAnnotation+":true")
}

// TestNodeLifecycleLeaseLapses: two nodes renew their Leases; one stops.
// Both sides must mark it Unknown (Ready and the pressure conditions, with
// KCM's reasons), taint it unreachable NoSchedule and NoExecute (its zone
// keeps a Ready node, so NoExecute tainting is not suspended), and mark
// its pod not ready, recording the pod's NodeNotReady event; the other
// node and its zone are left alone.
func TestNodeLifecycleLeaseLapses(t *testing.T) {
	s := &nodeScenario{pods: func(node string) []*corev1.Pod {
		p := pod("web", nil)
		p.Spec.NodeName = node
		return []*corev1.Pod{p}
	}}
	r := nodeLifecycleRunner(t, env(t))
	start := time.Now()
	sc := differential.Scenario{
		Name:       "node-lifecycle: a node's Lease lapses",
		Controller: nodelifecycle.Name,
		Setup:      withDefaultSA(s.setup),
		Act:        s.act,
		Observe:    s.observe,
		Settled: func(state []map[string]any) bool {
			return unreachableTainted(state) && podNotReady(state, "web")
		},
		Cleanup: s.cleanup,
	}
	res, err := r.Run(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: both sides settled in %v", sc.Name, time.Since(start).Round(time.Millisecond))
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
	b := fmt.Sprint(nodeState(res.Native, "Node", "<ns>-b"))
	if strings.Contains(b, "taints") || !strings.Contains(b, "status:True type:Ready") {
		t.Errorf("the renewing node was touched: %s", b)
	}
	a := fmt.Sprint(nodeState(res.Native, "Node", "<ns>-a")["status"])
	for _, c := range []string{"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"} {
		want := "message:Kubelet stopped posting node status. reason:NodeStatusUnknown " +
			"status:Unknown type:" + c
		if !strings.Contains(a, want) {
			t.Errorf("condition %s not Unknown with KCM's reason: %s", c, a)
		}
	}
}

// TestNodeLifecycleTaintEviction: the same lapse with the
// taint-eviction-controller running on each side: a pod tolerating
// unreachable:NoExecute for 2s is evicted once they pass; a pod with the
// API server's default 300s toleration stays, not ready.
func TestNodeLifecycleTaintEviction(t *testing.T) {
	s := &nodeScenario{pods: func(node string) []*corev1.Pod {
		brief := pod("brief", nil)
		brief.Spec.NodeName = node
		brief.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable,
			Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr.To[int64](2)}}
		patient := pod("patient", nil)
		patient.Spec.NodeName = node
		return []*corev1.Pod{brief, patient}
	}}
	r := nodeLifecycleRunner(t, env(t))
	start := time.Now()
	sc := differential.Scenario{
		Name:       "node-lifecycle: a lapsed node's pods evicted after their toleration",
		Controller: nodelifecycle.Name,
		With:       []string{"taint-eviction-controller"},
		Setup:      withDefaultSA(s.setup),
		Act:        s.act,
		Observe:    s.observe,
		Settled: func(state []map[string]any) bool {
			return unreachableTainted(state) && podDeleting(state, "brief") &&
				podNotReady(state, "patient") && !podDeleting(state, "patient")
		},
		Cleanup: s.cleanup,
	}
	res, err := r.Run(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: both sides settled in %v", sc.Name, time.Since(start).Round(time.Millisecond))
	if d := res.Diff(); d != "" {
		t.Errorf("%s: native and upstream differ:\n%s", sc.Name, d)
	}
}
