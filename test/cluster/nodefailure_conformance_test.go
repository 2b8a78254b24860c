//go:build conformance && unix

package cluster_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/test/cluster"
)

var (
	managersFlag = flag.String("cluster.managers", "upstream,native",
		"TestNodeFailure: the controller managers to compare, the reference first")
	reportFlag = flag.String("cluster.report", "",
		"TestNodeFailure: also write its table (Markdown) to this file")
)

const (
	zoneLabel = "topology.kubernetes.io/zone"
	// tolerationSeconds is how long the workloads' pods stay on a node
	// that became unreachable or not ready (the API server's default is
	// 300 s).
	tolerationSeconds = 10
	// observeEvery is how often the node-failure test looks at the
	// cluster: the resolution of its figures.
	observeEvery = 250 * time.Millisecond
	// failureDeadline bounds each wait of the node-failure test: a node
	// goes unknown 50 s (--node-monitor-grace-period) after its last
	// heartbeat at most, and every step after it takes seconds.
	failureDeadline = 4 * time.Minute
)

// The node groups of TestNodeFailure: zone-a is failed whole in the
// second part; zone-b loses one node in the first.
var failureGroups = []cluster.NodeGroup{
	{Name: "zone-a", Nodes: 3, Labels: map[string]string{zoneLabel: "zone-a"}},
	{Name: "zone-b-victim", Nodes: 1, Labels: map[string]string{zoneLabel: "zone-b"}},
	{Name: "zone-b", Nodes: 2, Labels: map[string]string{zoneLabel: "zone-b"}},
}

// nodeFailure is what one controller manager did when nodes failed, each
// figure from the moment the nodes' kwok was killed.
type nodeFailure struct {
	manager cluster.Manager
	// One node of zone-b fails.
	unknown, tainted, evicted, replaced time.Duration
	// beatToUnknown is from the node's last heartbeat (its Lease's renewal
	// or its Ready condition's, whichever came last) to Unknown: the
	// --node-monitor-grace-period as the controller keeps it.
	beatToUnknown time.Duration
	// All of zone-a fails: when each node got its NoExecute taint (as the
	// taints' TimeAdded say, to the second), in order.
	zoneTaints []time.Duration
}

// TestNodeFailure kills kubelets (kwok processes) under each controller
// manager of -cluster.managers and checks that the cluster heals as
// upstream KCM heals it:
//
//  1. One node of three in zone-b fails: node-lifecycle marks it Unknown
//     and taints it node.kubernetes.io/unreachable:NoExecute,
//     taint-eviction deletes its pods once their 10 s toleration ran out,
//     the Deployment's ReplicaSet replaces them, the scheduler places them
//     on zone-b's live nodes and kwok runs them.
//  2. Then all three nodes of zone-a fail while zone-b still works: the
//     zone is fully disrupted, and its nodes are tainted one at a time at
//     --node-eviction-rate (0.1 nodes a second: 10 s apart), not at once.
//
// It reports, per manager, the time from the kill to each step, with the
// ratio to the reference's (docs/benchmarks.md); the test asserts what
// happens and the order, the figures are measurements.
func TestNodeFailure(t *testing.T) {
	results := eachManager(t, runNodeFailure)
	if t.Failed() {
		return
	}
	table := nodeFailureTable(results)
	t.Logf("node failure, time from the kill:\n%s", table)
	writeReport(t, table)
}

// eachManager builds the controller managers of -cluster.managers and
// runs run for each, in order, in a subtest named after it, returning the
// results of those that did not fail the test.
func eachManager[R any](t *testing.T, run func(*testing.T, cluster.Manager, string) R) []R {
	t.Helper()
	var managers []cluster.Manager
	for m := range strings.SplitSeq(*managersFlag, ",") {
		managers = append(managers, cluster.Manager(m))
	}
	bins, err := cluster.BuildManagers(t.Context(), t.TempDir(), os.Stderr, managers...)
	if err != nil {
		t.Fatal(err)
	}
	var results []R
	for _, m := range managers {
		t.Run(string(m), func(t *testing.T) {
			results = append(results, run(t, m, bins[m]))
		})
	}
	return results
}

func runNodeFailure(t *testing.T, m cluster.Manager, binary string) nodeFailure {
	dir := t.TempDir()
	if *dirFlag != "" {
		dir = *dirFlag + "/" + string(m)
	}
	c, err := cluster.Start(t.Context(), cluster.Options{Manager: m, ManagerBinary: binary,
		NodeGroups: failureGroups, Dir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	cs := kubernetes.NewForConfigOrDie(c.Config())
	ctx := t.Context()
	res := nodeFailure{manager: m}
	if err := c.ServiceAccountPreflight(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}

	// 1. One node of zone-b fails.
	const ns = "failure"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the namespace's default ServiceAccount", func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	const replicas = 6
	createDeployment(t, cs, ns, "web", replicas, map[string]string{zoneLabel: "zone-b"})
	victim := c.NodesOf("zone-b-victim")[0]
	waitFor(t, "six Ready pods, some on "+victim, func(ctx context.Context) error {
		pods, err := deploymentPods(ctx, cs, ns, "web")
		if err != nil {
			return err
		}
		ready := readyPods(pods, "")
		if ready != replicas || !slices.ContainsFunc(pods, onNode(victim)) {
			return fmt.Errorf("%d Ready; on the victim: %t", ready,
				slices.ContainsFunc(pods, onNode(victim)))
		}
		return nil
	})
	var onVictim []string
	pods, err := deploymentPods(ctx, cs, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName == victim {
			onVictim = append(onVictim, p.Name)
		}
	}
	killed := time.Now()
	if err := c.FailNodeGroup("zone-b-victim"); err != nil {
		t.Fatal(err)
	}
	lastBeat, err := lastHeartbeat(ctx, cs, victim)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		what string
		into *time.Duration
		done func(ctx context.Context) error
	}{
		{victim + " Unknown", &res.unknown, func(ctx context.Context) error {
			return nodeReady(ctx, cs, victim, corev1.ConditionUnknown)
		}},
		{victim + " tainted unreachable:NoExecute", &res.tainted, func(ctx context.Context) error {
			_, err := noExecuteTaint(ctx, cs, victim)
			return err
		}},
		{"its pods evicted", &res.evicted, func(ctx context.Context) error {
			for _, name := range onVictim {
				p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if p.DeletionTimestamp == nil {
					return fmt.Errorf("pod %s is not being deleted", name)
				}
			}
			return nil
		}},
		{"six Ready replacements on live nodes", &res.replaced, func(ctx context.Context) error {
			pods, err := deploymentPods(ctx, cs, ns, "web")
			if err != nil {
				return err
			}
			if n := readyPods(pods, victim); n != replicas {
				return fmt.Errorf("%d of %d Ready off %s", n, replicas, victim)
			}
			return nil
		}},
	}
	for _, s := range steps {
		waitFor(t, s.what, s.done)
		*s.into = time.Since(killed)
	}
	res.beatToUnknown = killed.Add(res.unknown).Sub(lastBeat)

	// 2. Zone-a fails whole while zone-b works.
	zoneA := c.NodesOf("zone-a")
	killed = time.Now()
	killedSecond := killed.Truncate(time.Second)
	if err := c.FailNodeGroup("zone-a"); err != nil {
		t.Fatal(err)
	}
	var added []time.Time
	waitFor(t, "every node of zone-a tainted unreachable:NoExecute", func(ctx context.Context) error {
		added = added[:0]
		for _, node := range zoneA {
			taint, err := noExecuteTaint(ctx, cs, node)
			if err != nil {
				return err
			}
			added = append(added, taint.TimeAdded.Time)
		}
		return nil
	})
	slices.SortFunc(added, func(a, b time.Time) int { return a.Compare(b) })
	for i, at := range added {
		res.zoneTaints = append(res.zoneTaints, at.Sub(killedSecond))
		// TimeAdded has a resolution of a second: 10 s apart reads 9 s or
		// more.
		if i > 0 && at.Sub(added[i-1]) < 9*time.Second {
			t.Errorf("zone-a's nodes were tainted %v apart (taints added at %v), "+
				"faster than --node-eviction-rate's 0.1 nodes a second", at.Sub(added[i-1]), added)
		}
	}
	if err := c.Alive(); err != nil {
		t.Fatal(err)
	}
	return res
}

// writeReport writes table to -cluster.report, if set.
func writeReport(t *testing.T, table string) {
	if *reportFlag == "" {
		return
	}
	err := os.MkdirAll(filepath.Dir(*reportFlag), 0o755)
	if err == nil {
		err = os.WriteFile(*reportFlag, []byte(table), 0o644)
	}
	if err != nil {
		t.Error(err)
	}
}

// waitFor polls done every observeEvery until it returns nil, failing the
// test after failureDeadline with its last error.
func waitFor(t *testing.T, what string, done func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), failureDeadline)
	defer cancel()
	tick := time.NewTicker(observeEvery)
	defer tick.Stop()
	for {
		err := done(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting %v for %s: %v", failureDeadline, what, err)
		case <-tick.C:
		}
	}
}

// createDeployment creates a Deployment of replicas pods on the nodes
// nodeSelector selects, spread over them, which leave a node that is
// unreachable or not ready after tolerationSeconds.
func createDeployment(t *testing.T, cs kubernetes.Interface, ns, name string, replicas int32,
	nodeSelector map[string]string) {
	t.Helper()
	labels := map[string]string{"app": name}
	var tolerations []corev1.Toleration
	for _, key := range []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady} {
		tolerations = append(tolerations, corev1.Toleration{Key: key,
			Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr.To[int64](tolerationSeconds)})
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: nodeSelector,
					Tolerations:  tolerations,
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
						WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector:     &metav1.LabelSelector{MatchLabels: labels},
					}},
					Containers: []corev1.Container{
						{Name: "pause", Image: "registry.k8s.io/pause:3.10"},
					},
				},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(t.Context(), d,
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deploymentPods lists the pods of Deployment name (label app=name).
func deploymentPods(ctx context.Context, cs kubernetes.Interface, ns, name string) (
	[]corev1.Pod, error,
) {
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// readyPods counts the pods that are Ready and not being deleted, except
// those on node notOn.
func readyPods(pods []corev1.Pod, notOn string) int {
	n := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != notOn && isReady(&p) {
			n++
		}
	}
	return n
}

func onNode(node string) func(corev1.Pod) bool {
	return func(p corev1.Pod) bool { return p.Spec.NodeName == node }
}

// nodeReady returns nil once node's Ready condition has status want.
func nodeReady(ctx context.Context, cs kubernetes.Interface, node string,
	want corev1.ConditionStatus) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == want {
				return nil
			}
			return fmt.Errorf("Ready is %s", c.Status)
		}
	}
	return fmt.Errorf("no Ready condition")
}

// lastHeartbeat returns when node last showed it lives: its Lease's
// renewal, or its Ready condition's heartbeat, whichever is later.
func lastHeartbeat(ctx context.Context, cs kubernetes.Interface, node string) (time.Time, error) {
	lease, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node,
		metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	var last time.Time
	if lease.Spec.RenewTime != nil {
		last = lease.Spec.RenewTime.Time
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.LastHeartbeatTime.After(last) {
			last = c.LastHeartbeatTime.Time
		}
	}
	return last, nil
}

// noExecuteTaint returns node's node.kubernetes.io/unreachable:NoExecute
// taint, or an error while it has none.
func noExecuteTaint(ctx context.Context, cs kubernetes.Interface, node string) (
	corev1.Taint, error,
) {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return corev1.Taint{}, err
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeUnreachable && taint.Effect == corev1.TaintEffectNoExecute &&
			taint.TimeAdded != nil {
			return taint, nil
		}
	}
	return corev1.Taint{}, fmt.Errorf("node %s has taints %v", node, n.Spec.Taints)
}

// nodeFailureTable is the Markdown table of results, the first the
// reference: each figure, and each other manager's ratio to it.
func nodeFailureTable(results []nodeFailure) string {
	var b strings.Builder
	b.WriteString("| from the kill to | " + joinManagers(results) + " |\n")
	b.WriteString("|---" + strings.Repeat("|---:", len(results)) + "|\n")
	row := func(what string, get func(nodeFailure) time.Duration) {
		fmt.Fprintf(&b, "| %s |", what)
		ref := get(results[0])
		for i, r := range results {
			d := get(r)
			fmt.Fprintf(&b, " %.1f s", d.Seconds())
			// Below a second a ratio says more of observeEvery than of
			// the controllers.
			if i > 0 && ref >= time.Second {
				fmt.Fprintf(&b, " (%.2fx)", d.Seconds()/ref.Seconds())
			}
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	row("one node: Unknown", func(r nodeFailure) time.Duration { return r.unknown })
	row("one node: tainted NoExecute", func(r nodeFailure) time.Duration { return r.tainted })
	row("one node: its pods evicted", func(r nodeFailure) time.Duration { return r.evicted })
	row("one node: all replacements Ready", func(r nodeFailure) time.Duration { return r.replaced })
	// When the node goes Unknown depends on when its last heartbeat fell
	// before the kill; the steps after it are the controllers' own.
	row("one node: last heartbeat → Unknown", func(r nodeFailure) time.Duration {
		return r.beatToUnknown
	})
	row("one node: Unknown → tainted", func(r nodeFailure) time.Duration {
		return r.tainted - r.unknown
	})
	row("one node: tainted → pods evicted", func(r nodeFailure) time.Duration {
		return r.evicted - r.tainted
	})
	row("one node: evicted → replacements Ready", func(r nodeFailure) time.Duration {
		return r.replaced - r.evicted
	})
	for i := range results[0].zoneTaints {
		row(fmt.Sprintf("zone-a down: node %d tainted", i+1), func(r nodeFailure) time.Duration {
			if i < len(r.zoneTaints) {
				return r.zoneTaints[i]
			}
			return 0
		})
	}
	return b.String()
}

func joinManagers(results []nodeFailure) string {
	names := make([]string, len(results))
	for i, r := range results {
		names[i] = string(r.manager)
	}
	return strings.Join(names, " | ")
}
