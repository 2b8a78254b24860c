//go:build integration

package differential_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/disruption"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// pdbHold keeps an evicted bare pod, deleted, in the API server: without a
// kubelet an unscheduled pod would go at once, and the budget would never
// see it terminating.
const pdbHold = "differential.ctrlhost.io/hold"

// evictions records, per namespace (one per side), what the scenario's
// evictions answered, in order: "<step> <pod>: ok" or the refusal's code
// and reason. Act and Observe run on one goroutine.
type evictions map[string][]string

// evict evicts pod, recording the answer under step and as (the pod's name
// or, when it is generated, its place among the pods).
func (e evictions) evict(ctx context.Context, cs kubernetes.Interface, ns, step, pod,
	as string) {
	err := cs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}})
	outcome := "ok"
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &status):
		outcome = fmt.Sprintf("%d %s", status.Status().Code, status.Status().Reason)
	case err != nil:
		outcome = err.Error()
	}
	e[ns] = append(e[ns], step+" "+as+": "+outcome)
}

func (e evictions) done(ns, step string) bool {
	return slices.ContainsFunc(e[ns], func(s string) bool { return strings.HasPrefix(s, step+" ") })
}

// pdbObserve returns the budgets, the live and terminating pods, and a
// summary: the evictions' answers and the disruption controller's events
// ("controllermanager" is its source on both sides), each distinct
// "type kind/name reason: message" once; pod events name their pod by kind
// only (generated names), and reasons in skip are left out (timing).
func pdbObserve(ev evictions, skip ...string) func(context.Context, kubernetes.Interface,
	string) ([]runtime.Object, error) {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object, error) {
		var objs []runtime.Object
		pdbs, err := cs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range pdbs.Items {
			pdbs.Items[i].Kind = "PodDisruptionBudget"
			objs = append(objs, &pdbs.Items[i])
		}
		pods, err := podsIn(ctx, cs, ns)
		if err != nil {
			return nil, err
		}
		objs = append(objs, pods...)
		l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var lines []string
		for _, e := range l.Items {
			if e.Source.Component != disruption.EventSource || slices.Contains(skip, e.Reason) {
				continue
			}
			obj := e.InvolvedObject.Kind
			if obj != "Pod" {
				obj += "/" + e.InvolvedObject.Name
			}
			line := e.Type + " " + obj + " " + e.Reason + ": " +
				strings.ReplaceAll(e.Message, ns, "<ns>")
			if !slices.Contains(lines, line) {
				lines = append(lines, line)
			}
		}
		slices.Sort(lines)
		summary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "summary"},
			Data: map[string]string{"evictions": strings.Join(ev[ns], "\n"),
				"events": strings.Join(lines, "\n")}}
		summary.Kind = "Summary"
		return append(objs, summary), nil
	}
}

// pdbStatus is a budget's status in the API server as
// "healthy/desired/expected/allowed disrupted=N reason", observed: its
// observedGeneration is its generation ("" otherwise).
func pdbStatus(ctx context.Context, cs kubernetes.Interface, ns, name string) string {
	p, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || p.Status.ObservedGeneration != p.Generation {
		return ""
	}
	return pdbStatusOf(p.Status)
}

func pdbStatusOf(st policyv1.PodDisruptionBudgetStatus) string {
	reason := ""
	for _, c := range st.Conditions {
		if c.Type == policyv1.DisruptionAllowedCondition {
			reason = c.Reason
		}
	}
	return fmt.Sprintf("%d/%d/%d/%d disrupted=%d %s", st.CurrentHealthy, st.DesiredHealthy,
		st.ExpectedPods, st.DisruptionsAllowed, len(st.DisruptedPods), reason)
}

// pdbStateStatus is pdbStatusOf of the named budget in a normalised state.
func pdbStateStatus(state []map[string]any, name string) string {
	o := deployState(state, "PodDisruptionBudget", name)
	if o == nil {
		return ""
	}
	f := func(k string) string {
		if v := deployField(o, "status."+k); v != "" {
			return v
		}
		return "0"
	}
	st, _ := o["status"].(map[string]any)
	disrupted, _ := st["disruptedPods"].(map[string]any)
	reason := ""
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == policyv1.DisruptionAllowedCondition {
			reason = fmt.Sprint(m["reason"])
		}
	}
	return fmt.Sprintf("%s/%s/%s/%s disrupted=%d %s", f("currentHealthy"), f("desiredHealthy"),
		f("expectedPods"), f("disruptionsAllowed"), len(disrupted), reason)
}

func pdbSummary(state []map[string]any, key string) string {
	return deployField(deployState(state, "Summary", "summary"), "data."+key)
}

// releasePods removes the hold from every pod of ns, then force-deletes
// them.
func releasePods(ctx context.Context, cs kubernetes.Interface, ns string) error {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range l.Items {
		if len(p.Finalizers) == 0 {
			continue
		}
		if err := unhold(ctx, cs, ns, p.Name); err != nil {
			return err
		}
	}
	return deletePods(ctx, cs, ns)
}

func unhold(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	_, err := cs.CoreV1().Pods(ns).Patch(ctx, name, types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// TestDisruptionDeployment: a budget of maxUnavailable 1 over a Deployment
// of 3 (its expected pods the Deployment's replicas, found through the
// ReplicaSet) allows one disruption once the pods are ready; a client
// evicts one pod (admitted: the pod goes, the ReplicaSet replaces it) and
// at once another (refused: the eviction took the one disruption allowed).
// Both sides settle at 3 healthy of 3 with one disruption allowed.
func TestDisruptionDeployment(t *testing.T) {
	ev := evictions{}
	const allowsOne = "3/2/3/1 disrupted=0 SufficientPods"
	evictTwo := func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		if ev.done(ns, "first") || pdbStatus(ctx, cs, ns, "web") != allowsOne {
			return nil
		}
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var names []string
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		slices.Sort(names)
		if len(names) != 3 {
			return nil
		}
		ev.evict(ctx, cs, ns, "first", names[0], "pod #0")
		ev.evict(ctx, cs, ns, "second", names[1], "pod #1")
		return nil
	}
	res := compare(t, differential.Scenario{
		Name:       "disruption budget over a deployment, with evictions",
		Controller: disruption.Name,
		With:       []string{"deployment-controller", "replicaset-controller"},
		Setup: withDefaultSA(func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployObj(3, deployImage),
				metav1.CreateOptions{}); err != nil {
				return err
			}
			web := &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: policyv1.PodDisruptionBudgetSpec{
					MaxUnavailable: ptr.To(intstr.FromInt32(1)),
					Selector: &metav1.LabelSelector{
						MatchLabels: map[string]string{"app": "web"}},
				},
			}
			_, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, web,
				metav1.CreateOptions{})
			return err
		}),
		Act: deployActs(runReady, evictTwo),
		// Whether the budget's first sync saw no pod yet is timing.
		Observe: pdbObserve(ev, "NoPods"),
		Settled: func(s []map[string]any) bool {
			return count(s, "Pod") == 3 && strings.Contains(pdbSummary(s, "evictions"), "second") &&
				pdbStateStatus(s, "web") == allowsOne
		},
		Cleanup: deletePods,
	})
	if got := pdbSummary(res.Native, "evictions"); !strings.Contains(got, "first") ||
		!strings.Contains(got, ": ok") || !strings.Contains(got, "429 TooManyRequests") {
		t.Errorf("native evictions:\n%s\nwant the first admitted, the second refused (429)", got)
	}
	t.Logf("native evictions:\n%s\nevents:\n%s", pdbSummary(res.Native, "evictions"),
		pdbSummary(res.Native, "events"))
}

// TestDisruptionBarePods: budgets over pods without a usable controller.
//   - "bare": minAvailable 3 over four ready pods (held by a finalizer) and
//     a sick one (running, not ready), unhealthyPodEvictionPolicy
//     AlwaysAllow: 4 healthy of 5 allow one disruption; bare-0's eviction
//     is admitted (it stays, terminating); once the controller counts 3
//     healthy, bare-1's is refused and the sick pod's admitted (an
//     unhealthy pod may always go); then bare-0 is released and goes.
//   - "loose": maxUnavailable 50% over two pods without a controller:
//     none expected, an UnmanagedPods warning, no disruption allowed.
//   - "scaled": minAvailable 50% over two pods of a ReplicaSet whose
//     controlling Deployment does not exist: the ReplicaSet's size is read
//     through the scale subresource.
//   - "broken": maxUnavailable 1 over a pod a ConfigMap controls: no scale
//     subresource, so the fail-safe status (SyncFailed).
func TestDisruptionBarePods(t *testing.T) {
	ev := evictions{}
	act := func(ctx context.Context, cs kubernetes.Interface, ns string) error {
		switch {
		case !ev.done(ns, "first"):
			if pdbStatus(ctx, cs, ns, "bare") == "4/3/5/1 disrupted=0 SufficientPods" {
				ev.evict(ctx, cs, ns, "first", "bare-0", "bare-0")
			}
		case !ev.done(ns, "second"):
			if pdbStatus(ctx, cs, ns, "bare") == "3/3/5/0 disrupted=0 InsufficientPods" {
				ev.evict(ctx, cs, ns, "second", "bare-1", "bare-1")
				ev.evict(ctx, cs, ns, "sick", "bare-sick", "bare-sick")
			}
		case !ev.done(ns, "released"):
			if err := unhold(ctx, cs, ns, "bare-0"); err != nil {
				return err
			}
			ev[ns] = append(ev[ns], "released bare-0")
		}
		return nil
	}
	res := compare(t, differential.Scenario{
		Name:       "disruption budgets over bare pods, with evictions",
		Controller: disruption.Name,
		Setup:      withDefaultSA(pdbBareSetup),
		Act:        act,
		Observe:    pdbObserve(ev),
		Settled: func(s []map[string]any) bool {
			return strings.Contains(pdbSummary(s, "evictions"), "released") &&
				pdbStateStatus(s, "bare") == "3/3/3/0 disrupted=0 InsufficientPods"
		},
		Cleanup: releasePods,
	})
	for name, want := range map[string]string{
		"bare":   "3/3/3/0 disrupted=0 InsufficientPods",
		"loose":  "2/0/0/0 disrupted=0 InsufficientPods",
		"scaled": "2/1/2/1 disrupted=0 SufficientPods",
		"broken": "0/0/0/0 disrupted=0 SyncFailed",
	} {
		if got := pdbStateStatus(res.Native, name); got != want {
			t.Errorf("native %s status %s, want %s", name, got, want)
		}
	}
	t.Logf("native evictions:\n%s\nevents:\n%s", pdbSummary(res.Native, "evictions"),
		pdbSummary(res.Native, "events"))
}

// pdbBareSetup makes the bare-pod scenario's pods (ready, as a kubelet
// would report them) and budgets.
func pdbBareSetup(ctx context.Context, cs kubernetes.Interface, ns string) error {
	rs, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: "ghost",
			UID: "00000000-0000-0000-0000-00000000beef", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "scaled"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "scaled"}},
				Spec:       pod("", nil).Spec},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	controlled := func(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid,
			Controller: ptr.To(true)}}
	}
	type spec struct {
		name, app string
		ready     bool
		hold      bool
		owners    []metav1.OwnerReference
	}
	specs := []spec{
		{"bare-0", "bare", true, true, nil}, {"bare-1", "bare", true, true, nil},
		{"bare-2", "bare", true, true, nil}, {"bare-3", "bare", true, true, nil},
		{"bare-sick", "bare", false, false, nil},
		{"loose-0", "loose", true, false, nil}, {"loose-1", "loose", true, false, nil},
		{"scaled-0", "scaled", true, false, controlled("apps/v1", "ReplicaSet", rs.Name, rs.UID)},
		{"scaled-1", "scaled", true, false, controlled("apps/v1", "ReplicaSet", rs.Name, rs.UID)},
		{"broken-0", "broken", true, false, controlled("v1", "ConfigMap", cm.Name, cm.UID)},
	}
	for _, s := range specs {
		p := pod(s.name, map[string]string{"app": s.app})
		p.OwnerReferences = s.owners
		if s.hold {
			p.Finalizers = []string{pdbHold}
		}
		p, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if err := setPhase(ctx, cs, p, corev1.PodRunning, 0); err != nil {
			return err
		}
		if s.ready {
			continue
		}
		p, err = cs.CoreV1().Pods(ns).Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range p.Status.Conditions {
			if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady ||
				c.Type == corev1.ContainersReady {
				c.Status = corev1.ConditionFalse
			}
		}
		p.Status.ContainerStatuses[0].Ready = false
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	selector := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	budgets := []*policyv1.PodDisruptionBudget{
		{ObjectMeta: metav1.ObjectMeta{Name: "bare"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(3)), Selector: selector("bare"),
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "loose"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromString("50%")), Selector: selector("loose")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "scaled"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromString("50%")), Selector: selector("scaled")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: selector("broken")}},
	}
	for _, b := range budgets {
		if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, b,
			metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// TestDisruptionExpiry: a budget's disruptedPods entries whose pods were
// never deleted expire after two minutes (each a NotDeleted warning on its
// pod): one already expired goes at the first sync, one that expires 20s
// into the run goes when the budget is rechecked, and one of a pod that
// does not exist goes at once. Beside it, a pod whose DisruptionTarget
// condition has been True for ten minutes without a deletion gets it reset
// to False; the kubelet's and a terminal pod's are left.
func TestDisruptionExpiry(t *testing.T) {
	res := compare(t, differential.Scenario{
		Name:       "disruption entries expire, stale DisruptionTarget reset",
		Controller: disruption.Name,
		Setup:      withDefaultSA(pdbExpirySetup),
		Observe:    pdbObserve(evictions{}),
		Settled: func(s []map[string]any) bool {
			return pdbStateStatus(s, "expiry") == "3/1/3/2 disrupted=0 SufficientPods" &&
				strings.Contains(fmt.Sprint(deployState(s, "Pod", "stale-evicted")),
					"status:False type:DisruptionTarget")
		},
		Cleanup: deletePods,
	})
	if ev := pdbSummary(res.Native, "events"); !strings.Contains(ev, "NotDeleted") {
		t.Errorf("native events:\n%s\nwant NotDeleted", ev)
	}
	for name, want := range map[string]string{"stale-evicted": "False", "stale-kubelet": "True",
		"stale-failed": "True"} {
		s := fmt.Sprint(deployState(res.Native, "Pod", name))
		if !strings.Contains(s, "status:"+want+" type:DisruptionTarget") {
			t.Errorf("native pod %s: %s\nwant DisruptionTarget %s", name, s, want)
		}
	}
}

func pdbExpirySetup(ctx context.Context, cs kubernetes.Interface, ns string) error {
	now := time.Now()
	for _, name := range []string{"p-0", "p-1", "p-2"} {
		p, err := cs.CoreV1().Pods(ns).Create(ctx, pod(name, map[string]string{"app": "expiry"}),
			metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if err := setPhase(ctx, cs, p, corev1.PodRunning, 0); err != nil {
			return err
		}
	}
	for _, s := range []struct {
		name, reason string
		phase        corev1.PodPhase
	}{
		{"stale-evicted", "EvictionByEvictionAPI", corev1.PodRunning},
		{"stale-kubelet", corev1.PodReasonTerminationByKubelet, corev1.PodRunning},
		{"stale-failed", "EvictionByEvictionAPI", corev1.PodFailed},
	} {
		p, err := cs.CoreV1().Pods(ns).Create(ctx, pod(s.name, map[string]string{"app": "stale"}),
			metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if err := setPhase(ctx, cs, p, s.phase, 1); err != nil {
			return err
		}
		if p, err = cs.CoreV1().Pods(ns).Get(ctx, s.name, metav1.GetOptions{}); err != nil {
			return err
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: s.reason,
			Message:            "disrupted ten minutes ago",
			LastTransitionTime: metav1.NewTime(now.Add(-10 * time.Minute))})
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "expiry"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "expiry"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	pdb.Status.DisruptedPods = map[string]metav1.Time{
		"p-0":  metav1.NewTime(now.Add(-10 * time.Minute)),
		"p-1":  metav1.NewTime(now.Add(-disruption.DeletionTimeout + 20*time.Second)),
		"gone": metav1.NewTime(now.Add(-10 * time.Second)),
	}
	_, err = cs.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
	return err
}
