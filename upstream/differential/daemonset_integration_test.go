//go:build integration

package differential_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// DaemonSet scenarios make their own Nodes (cluster-scoped): named after
// the namespace, labelled differential=<ns> so that Cleanup finds them.
// Every DaemonSet selects its scenario's nodes through a nodeSelector on
// dsScenarioLabel, whose value is the scenario's, the same on both sides:
// the namespace cannot go into the template, because the template's hash
// names the ControllerRevisions, and those names are compared exactly.
// Scenarios run one after the other and each side's Cleanup deletes its
// nodes, so no side sees another's.
const dsScenarioLabel = "differential.ctrlhost.io/daemonset-scenario"

// dsNode describes one Node of a scenario.
type dsNode struct {
	suffix        string
	labels        map[string]string
	taints        []corev1.Taint
	unschedulable bool
}

// createNodes creates the nodes for scenario in ns as the node lifecycle
// controller would leave them once their kubelets reported ready: the
// not-ready taint admission puts on new nodes removed, and an
// unschedulable node tainted node.kubernetes.io/unschedulable:NoSchedule.
func createNodes(ctx context.Context, cs kubernetes.Interface, ns, scenario string, nodes ...dsNode) error {
	for _, n := range nodes {
		lbls := map[string]string{"differential": ns, dsScenarioLabel: scenario}
		for k, v := range n.labels {
			lbls[k] = v
		}
		node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + n.suffix, Labels: lbls},
			Spec:       corev1.NodeSpec{Unschedulable: n.unschedulable},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		taints := slices.Clone(n.taints)
		if n.unschedulable {
			taints = append(taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
		}
		node.Spec.Taints = taints
		if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// dsCleanup deletes the scenario's DaemonSets (so that the other side's
// controller, which lists every namespace, does not place their pods on its
// nodes, which carry the same scenario label), nodes and pods.
func dsCleanup(ctx context.Context, cs kubernetes.Interface, ns string) error {
	if err := cs.AppsV1().DaemonSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "differential=" + ns}); err != nil {
		return err
	}
	return deletePods(ctx, cs, ns)
}

// daemonSetObj is a DaemonSet of pause pods selecting the scenario's nodes.
func daemonSetObj(name, scenario string, strategy appsv1.DaemonSetUpdateStrategy) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	spec := pod("", nil).Spec
	spec.NodeSelector = map[string]string{dsScenarioLabel: scenario}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			Template:       corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
			UpdateStrategy: strategy,
		},
	}
}

var rollingOne = appsv1.DaemonSetUpdateStrategy{
	Type:          appsv1.RollingUpdateDaemonSetStrategyType,
	RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
}

// finishTerminating plays the kubelet's part in a graceful deletion: a
// pod that is being deleted goes at once.
func finishTerminating(ctx context.Context, cs kubernetes.Interface, ns string) error {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			continue
		}
		err := cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// kubeletAndScheduler binds daemon pods to their target nodes, runs them
// ready, and finishes graceful deletions.
func kubeletAndScheduler(ctx context.Context, cs kubernetes.Interface, ns string) error {
	if err := finishTerminating(ctx, cs, ns); err != nil {
		return err
	}
	if err := bindToTarget(ctx, cs, ns); err != nil {
		return err
	}
	return runReady(ctx, cs, ns)
}

// observeDaemonSets returns the namespace's DaemonSets, its
// ControllerRevisions, its pods renamed after the node each is for
// ("pod:<ds>:<node>:<n>", n counting a node's pods oldest first, since
// generated names sort at random and would pair pods of different nodes),
// and the summary of the namespace's events.
func observeDaemonSets(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
	var out []runtime.Object
	dss, err := cs.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range dss.Items {
		dss.Items[i].Kind = "DaemonSet"
		out = append(out, &dss.Items[i])
	}
	crs, err := cs.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range crs.Items {
		crs.Items[i].Kind = "ControllerRevision"
		out = append(out, &crs.Items[i])
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	items := pods.Items
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].CreationTimestamp.Equal(&items[j].CreationTimestamp) {
			return items[i].CreationTimestamp.Before(&items[j].CreationTimestamp)
		}
		return items[i].Name < items[j].Name
	})
	perNode := map[string]int{}
	for i := range items {
		p := &items[i]
		owner := ""
		if ref := metav1.GetControllerOf(p); ref != nil {
			owner = ref.Name
		}
		node := p.Spec.NodeName
		if node == "" {
			node = targetNode(p)
		}
		k := owner + ":" + node
		p.Name = fmt.Sprintf("pod:%s:%d", k, perNode[k])
		perNode[k]++
		p.Kind = "Pod"
		out = append(out, p)
	}
	summary, err := differential.EventSummary(ctx, cs, ns, nil)
	if err != nil {
		return nil, err
	}
	return append(out, summary), nil
}

// dsStatus reads a field of the named DaemonSet's status in a normalised
// state ("0" when absent: zero counts are omitted; "" without the
// DaemonSet).
func dsStatus(state []map[string]any, name, field string) string {
	for _, o := range state {
		if o["kind"] != "DaemonSet" || nameOfState(o) != name {
			continue
		}
		st, _ := o["status"].(map[string]any)
		if v, ok := st[field]; ok {
			return fmt.Sprint(v)
		}
		return "0"
	}
	return ""
}

func nameOfState(o map[string]any) string {
	md, _ := o["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}

// podsRunning counts pods bound and Running in a normalised state.
func podsRunning(state []map[string]any) int {
	n := 0
	for _, o := range state {
		if o["kind"] != "Pod" {
			continue
		}
		st, _ := o["status"].(map[string]any)
		sp, _ := o["spec"].(map[string]any)
		md, _ := o["metadata"].(map[string]any)
		if st["phase"] == "Running" && sp["nodeName"] != nil && md["deletionTimestamp"] == nil {
			n++
		}
	}
	return n
}

// TestDaemonSetTaintsAndUnschedulable: of five nodes, the one with an
// untolerated NoSchedule taint and the one with an untolerated NoExecute
// taint get no pod; the unschedulable one (tolerated by the default
// toleration) and the not-ready one (NoExecute, tolerated by default) do.
func TestDaemonSetTaintsAndUnschedulable(t *testing.T) {
	const scen = "taints"
	res := compare(t, differential.Scenario{
		Name: "daemonset places pods by taints", Controller: "daemonset-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := createNodes(ctx, cs, ns, scen,
				dsNode{suffix: "a"},
				dsNode{suffix: "b", taints: []corev1.Taint{{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}},
				dsNode{suffix: "c", unschedulable: true},
				dsNode{suffix: "d", taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}}},
				dsNode{suffix: "e", taints: []corev1.Taint{{Key: "example.com/evict", Effect: corev1.TaintEffectNoExecute}}},
			); err != nil {
				return err
			}
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, daemonSetObj("agent", scen, rollingOne), metav1.CreateOptions{})
			return err
		}),
		Act:     kubeletAndScheduler,
		Observe: observeDaemonSets,
		Settled: func(state []map[string]any) bool {
			return podsRunning(state) == 3 && dsStatus(state, "agent", "numberAvailable") == "3"
		},
		Cleanup: dsCleanup,
	})
	if n := podsRunning(res.Native); n != 3 {
		t.Errorf("native side ended with %d running pods, want 3", n)
	}
}

// TestDaemonSetNodeAffinity: a required node affinity (zone In [x], no
// role label) and the nodeSelector leave one node of three; the pod's own
// preferred affinity survives KCM's targeting.
func TestDaemonSetNodeAffinity(t *testing.T) {
	const scen = "affinity"
	res := compare(t, differential.Scenario{
		Name: "daemonset honours node affinity", Controller: "daemonset-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := createNodes(ctx, cs, ns, scen,
				dsNode{suffix: "a", labels: map[string]string{"zone": "x"}},
				dsNode{suffix: "b", labels: map[string]string{"zone": "y"}},
				dsNode{suffix: "c", labels: map[string]string{"zone": "x", "role": "edge"}},
			); err != nil {
				return err
			}
			ds := daemonSetObj("agent", scen, rollingOne)
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}},
						{Key: "role", Operator: corev1.NodeSelectorOpDoesNotExist},
					},
				}}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
					Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: "zone", Operator: corev1.NodeSelectorOpExists},
					}},
				}},
			}}
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
			return err
		}),
		Act:     kubeletAndScheduler,
		Observe: observeDaemonSets,
		Settled: func(state []map[string]any) bool {
			return podsRunning(state) == 1 && dsStatus(state, "agent", "numberAvailable") == "1"
		},
		Cleanup: dsCleanup,
	})
	if n := podsRunning(res.Native); n != 1 {
		t.Errorf("native side ended with %d running pods, want 1", n)
	}
}

// templateChange changes the named DaemonSet's template once all of its
// want pods are available and updated, and the template is unchanged.
func templateChange(name string, want int) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := ds.Status
		if ds.Spec.Template.Annotations["rollout"] != "" || st.ObservedGeneration != ds.Generation ||
			st.NumberAvailable != int32(want) || st.UpdatedNumberScheduled != int32(want) {
			return nil
		}
		ds.Spec.Template.Annotations = map[string]string{"rollout": "2"}
		_, err = cs.AppsV1().DaemonSets(ns).Update(ctx, ds, metav1.UpdateOptions{})
		return err
	}
}

func acts(fs ...func(context.Context, kubernetes.Interface, string) error) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		for _, f := range fs {
			if err := f(ctx, cs, ns); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestDaemonSetRollingUpdate: a template change under RollingUpdate with
// maxUnavailable 1 replaces the three pods one at a time; the DaemonSet
// ends with every pod updated and two ControllerRevisions.
func TestDaemonSetRollingUpdate(t *testing.T) {
	const scen = "rolling"
	res := compare(t, differential.Scenario{
		Name: "daemonset rolling update", Controller: "daemonset-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := createNodes(ctx, cs, ns, scen, dsNode{suffix: "a"}, dsNode{suffix: "b"}, dsNode{suffix: "c"}); err != nil {
				return err
			}
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, daemonSetObj("agent", scen, rollingOne), metav1.CreateOptions{})
			return err
		}),
		Act:     acts(kubeletAndScheduler, templateChange("agent", 3)),
		Observe: observeDaemonSets,
		Settled: func(state []map[string]any) bool {
			return count(state, "ControllerRevision") == 2 && count(state, "Pod") == 3 && podsRunning(state) == 3 &&
				dsStatus(state, "agent", "updatedNumberScheduled") == "3" && dsStatus(state, "agent", "numberAvailable") == "3" &&
				strings.Contains(fmt.Sprint(state), "rollout:2")
		},
		Cleanup: dsCleanup,
	})
	if n := count(res.Native, "ControllerRevision"); n != 2 {
		t.Errorf("native side ended with %d revisions, want 2", n)
	}
}

// TestDaemonSetOnDelete: a template change under OnDelete makes a second
// revision and replaces no pod: updatedNumberScheduled stays 0.
func TestDaemonSetOnDelete(t *testing.T) {
	const scen = "ondelete"
	res := compare(t, differential.Scenario{
		Name: "daemonset OnDelete", Controller: "daemonset-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := createNodes(ctx, cs, ns, scen, dsNode{suffix: "a"}, dsNode{suffix: "b"}); err != nil {
				return err
			}
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, daemonSetObj("agent", scen,
				appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}), metav1.CreateOptions{})
			return err
		}),
		Act:     acts(kubeletAndScheduler, templateChange("agent", 2)),
		Observe: observeDaemonSets,
		Settled: func(state []map[string]any) bool {
			return count(state, "ControllerRevision") == 2 && podsRunning(state) == 2 &&
				dsStatus(state, "agent", "updatedNumberScheduled") == "0" && strings.Contains(fmt.Sprint(state), "rollout:2")
		},
		Cleanup: dsCleanup,
	})
	if got := dsStatus(res.Native, "agent", "updatedNumberScheduled"); got != "0" {
		t.Errorf("native side: updatedNumberScheduled %s, want 0", got)
	}
}

// TestDaemonSetNodeAdded: a node added once the first two pods run gets
// its pod.
func TestDaemonSetNodeAdded(t *testing.T) {
	const scen = "nodeadded"
	res := compare(t, differential.Scenario{
		Name: "daemonset follows a new node", Controller: "daemonset-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := createNodes(ctx, cs, ns, scen, dsNode{suffix: "a"}, dsNode{suffix: "b"}); err != nil {
				return err
			}
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, daemonSetObj("agent", scen, rollingOne), metav1.CreateOptions{})
			return err
		}),
		Act: acts(kubeletAndScheduler, func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
			if err != nil || ds.Status.NumberAvailable != 2 || ds.Status.DesiredNumberScheduled != 2 {
				return err
			}
			_, err = cs.CoreV1().Nodes().Get(ctx, ns+"-c", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return err
			}
			return createNodes(ctx, cs, ns, scen, dsNode{suffix: "c"})
		}),
		Observe: observeDaemonSets,
		Settled: func(state []map[string]any) bool {
			return podsRunning(state) == 3 && dsStatus(state, "agent", "numberAvailable") == "3"
		},
		Cleanup: dsCleanup,
	})
	if n := podsRunning(res.Native); n != 3 {
		t.Errorf("native side ended with %d running pods, want 3", n)
	}
}

// TestDaemonSetFailedPodReplaced: a daemon pod that fails (once) is
// deleted, with a FailedDaemonPod event, and replaced.
func TestDaemonSetFailedPodReplaced(t *testing.T) {
	const scen = "failed"
	var mu sync.Mutex
	failed := map[string]bool{} // by namespace: each side fails one pod once
	res := compare(t, differential.Scenario{
		Name: "daemonset replaces a failed pod", Controller: "daemonset-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := createNodes(ctx, cs, ns, scen, dsNode{suffix: "a"}, dsNode{suffix: "b"}); err != nil {
				return err
			}
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, daemonSetObj("agent", scen, rollingOne), metav1.CreateOptions{})
			return err
		}),
		Act: acts(kubeletAndScheduler, func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			mu.Lock()
			defer mu.Unlock()
			if failed[ns] {
				return nil
			}
			ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
			if err != nil || ds.Status.NumberAvailable != 2 {
				return err
			}
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i := range l.Items {
				if p := &l.Items[i]; p.Spec.NodeName == ns+"-a" && p.Status.Phase == corev1.PodRunning {
					if err := setPhase(ctx, cs, p, corev1.PodFailed, 1); err != nil {
						return err
					}
					failed[ns] = true
				}
			}
			return nil
		}),
		Observe: observeDaemonSets,
		Settled: func(state []map[string]any) bool {
			return podsRunning(state) == 2 && count(state, "Pod") == 2 && dsStatus(state, "agent", "numberAvailable") == "2" &&
				strings.Contains(differential.EventsOf(state), "FailedDaemonPod")
		},
		Cleanup: dsCleanup,
	})
	if ev := differential.EventsOf(res.Native); !strings.Contains(ev, "DaemonSet FailedDaemonPod") || !strings.Contains(ev, "DaemonSet SuccessfulDelete") {
		t.Errorf("native side's events %q lack FailedDaemonPod or SuccessfulDelete", ev)
	}
}

// TestDaemonSetMaxSurge: a template change under RollingUpdate with
// maxSurge 1 (maxUnavailable 0) starts each new pod beside the old one and
// deletes the old one once the new is available; every pod ends updated.
func TestDaemonSetMaxSurge(t *testing.T) {
	const scen = "surge"
	surge := appsv1.DaemonSetUpdateStrategy{
		Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1)),
		},
	}
	res := compare(t, differential.Scenario{
		Name: "daemonset surge update", Controller: "daemonset-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := createNodes(ctx, cs, ns, scen, dsNode{suffix: "a"}, dsNode{suffix: "b"}, dsNode{suffix: "c"}); err != nil {
				return err
			}
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, daemonSetObj("agent", scen, surge), metav1.CreateOptions{})
			return err
		}),
		Act:     acts(kubeletAndScheduler, templateChange("agent", 3)),
		Observe: observeDaemonSets,
		Settled: func(state []map[string]any) bool {
			return count(state, "ControllerRevision") == 2 && count(state, "Pod") == 3 && podsRunning(state) == 3 &&
				dsStatus(state, "agent", "updatedNumberScheduled") == "3" && dsStatus(state, "agent", "numberAvailable") == "3" &&
				strings.Contains(fmt.Sprint(state), "rollout:2")
		},
		Cleanup: dsCleanup,
	})
	if got := dsStatus(res.Native, "agent", "updatedNumberScheduled"); got != "3" {
		t.Errorf("native side: updatedNumberScheduled %s, want 3", got)
	}
}

// TestDaemonSetRevisionHistoryLimit: three templates with
// revisionHistoryLimit 1 leave two revisions, the current and the newest
// old one.
func TestDaemonSetRevisionHistoryLimit(t *testing.T) {
	const scen = "history"
	res := compare(t, differential.Scenario{
		Name: "daemonset history limit", Controller: "daemonset-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := createNodes(ctx, cs, ns, scen, dsNode{suffix: "a"}, dsNode{suffix: "b"}); err != nil {
				return err
			}
			ds := daemonSetObj("agent", scen, rollingOne)
			ds.Spec.RevisionHistoryLimit = ptr.To[int32](1)
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
			return err
		}),
		Act: acts(kubeletAndScheduler, func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			// Two template changes, each once the previous one rolled out.
			ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
			if err != nil {
				return err
			}
			st := ds.Status
			step := ds.Spec.Template.Annotations["rollout"]
			if step == "3" || st.ObservedGeneration != ds.Generation || st.NumberAvailable != 2 || st.UpdatedNumberScheduled != 2 {
				return nil
			}
			next := map[string]string{"": "2", "2": "3"}[step]
			ds.Spec.Template.Annotations = map[string]string{"rollout": next}
			_, err = cs.AppsV1().DaemonSets(ns).Update(ctx, ds, metav1.UpdateOptions{})
			return err
		}),
		Observe: observeDaemonSets,
		Settled: func(state []map[string]any) bool {
			return count(state, "ControllerRevision") == 2 && podsRunning(state) == 2 && count(state, "Pod") == 2 &&
				dsStatus(state, "agent", "updatedNumberScheduled") == "2" && dsStatus(state, "agent", "numberAvailable") == "2" &&
				strings.Contains(fmt.Sprint(state), "rollout:3")
		},
		Cleanup: dsCleanup,
	})
	if n := count(res.Native, "ControllerRevision"); n != 2 {
		t.Errorf("native side ended with %d revisions, want 2", n)
	}
}

// TestDaemonSetAdoptsOrphans: two matching orphan pods bound to one node
// are adopted and the newer deleted (one pod per node); the other node
// gets a new pod. Under OnDelete the adopted pod stays, not updated.
func TestDaemonSetAdoptsOrphans(t *testing.T) {
	const scen = "adopt"
	res := compare(t, differential.Scenario{
		Name: "daemonset adopts orphans", Controller: "daemonset-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := createNodes(ctx, cs, ns, scen, dsNode{suffix: "a"}, dsNode{suffix: "b"}); err != nil {
				return err
			}
			for _, name := range []string{"orphan-1", "orphan-2"} {
				p := pod(name, map[string]string{"app": "agent"})
				p.Spec.NodeName = ns + "-a"
				created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				if err != nil {
					return err
				}
				if err := setPhase(ctx, cs, created, corev1.PodRunning, 0); err != nil {
					return err
				}
			}
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, daemonSetObj("agent", scen,
				appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}), metav1.CreateOptions{})
			return err
		}),
		Act:     kubeletAndScheduler,
		Observe: observeDaemonSets,
		Settled: func(state []map[string]any) bool {
			return count(state, "Pod") == 2 && podsRunning(state) == 2 && dsStatus(state, "agent", "numberAvailable") == "2"
		},
		Cleanup: dsCleanup,
	})
	if got := dsStatus(res.Native, "agent", "updatedNumberScheduled"); got != "1" {
		t.Errorf("native side: updatedNumberScheduled %s, want 1 (the adopted pod is not of the current revision)", got)
	}
}

// TestDaemonSetNodeBecomesIneligible: once the pods run, one node loses
// the label the nodeSelector asks for and another gets an untolerated
// NoExecute taint; their pods are deleted, a third node with a new
// untolerated NoSchedule taint keeps its pod (misscheduled).
func TestDaemonSetNodeBecomesIneligible(t *testing.T) {
	const scen = "ineligible"
	var mu sync.Mutex
	changed := map[string]bool{}
	res := compare(t, differential.Scenario{
		Name: "daemonset leaves nodes that become ineligible", Controller: "daemonset-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := createNodes(ctx, cs, ns, scen, dsNode{suffix: "a"}, dsNode{suffix: "b"}, dsNode{suffix: "c"}, dsNode{suffix: "d"}); err != nil {
				return err
			}
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, daemonSetObj("agent", scen, rollingOne), metav1.CreateOptions{})
			return err
		}),
		Act: acts(kubeletAndScheduler, func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			mu.Lock()
			defer mu.Unlock()
			if changed[ns] {
				return nil
			}
			ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
			if err != nil || ds.Status.NumberAvailable != 4 {
				return err
			}
			edits := map[string]func(*corev1.Node){
				"b": func(n *corev1.Node) { delete(n.Labels, dsScenarioLabel) },
				"c": func(n *corev1.Node) {
					n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/evict", Effect: corev1.TaintEffectNoExecute})
				},
				"d": func(n *corev1.Node) {
					n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/drain", Effect: corev1.TaintEffectNoSchedule})
				},
			}
			for suffix, edit := range edits {
				n, err := cs.CoreV1().Nodes().Get(ctx, ns+"-"+suffix, metav1.GetOptions{})
				if err != nil {
					return err
				}
				edit(n)
				if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			changed[ns] = true
			return nil
		}),
		Observe: observeDaemonSets,
		Settled: func(state []map[string]any) bool {
			return count(state, "Pod") == 2 && dsStatus(state, "agent", "desiredNumberScheduled") == "1" &&
				dsStatus(state, "agent", "numberMisscheduled") == "1"
		},
		Cleanup: dsCleanup,
	})
	if n := count(res.Native, "Pod"); n != 2 {
		t.Errorf("native side ended with %d pods, want 2", n)
	}
}

// TestDaemonSetHostNetworkAndMinReady: hostNetwork pods tolerate an
// unavailable network, the template's own not-ready toleration (with
// tolerationSeconds) is replaced by the default one, and with
// minReadySeconds 2 the pods count as available only later.
func TestDaemonSetHostNetworkAndMinReady(t *testing.T) {
	const scen = "hostnet"
	res := compare(t, differential.Scenario{
		Name: "daemonset hostNetwork and minReadySeconds", Controller: "daemonset-controller",
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if err := createNodes(ctx, cs, ns, scen,
				dsNode{suffix: "a", taints: []corev1.Taint{{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule}}},
				dsNode{suffix: "b"},
			); err != nil {
				return err
			}
			ds := daemonSetObj("agent", scen, rollingOne)
			ds.Spec.MinReadySeconds = 2
			ds.Spec.Template.Spec.HostNetwork = true
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)},
				{Key: "example.com/own", Operator: corev1.TolerationOpExists},
			}
			_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
			return err
		}),
		Act:     kubeletAndScheduler,
		Observe: observeDaemonSets,
		Settled: func(state []map[string]any) bool {
			return podsRunning(state) == 2 && dsStatus(state, "agent", "numberAvailable") == "2"
		},
		Cleanup: dsCleanup,
	})
	if n := podsRunning(res.Native); n != 2 {
		t.Errorf("native side ended with %d running pods, want 2", n)
	}
}
