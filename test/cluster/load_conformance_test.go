//go:build conformance && unix

package cluster_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/test/cluster"
)

var (
	loadNodes = flag.Int("cluster.load-nodes", 500, "TestLoad: kwok nodes")
	loadPods  = flag.Int("cluster.load-pods", 10000,
		"TestLoad: pods of the first phase, four fifths in Deployments, one fifth in Jobs")
	loadPhaseDeadline = flag.Duration("cluster.load-deadline", 20*time.Minute,
		"TestLoad: how long each phase may take")
)

const (
	loadNamespace = "load"
	// loadEvery is how often TestLoad looks at the workloads: the
	// resolution of its phase times.
	loadEvery = time.Second
)

// loadManagerArgs are added to kubeadm's command line on both sides of
// TestLoad. The client rate limits are lifted as kwok's own clusters
// lift them (kwokctl --disable-qps-limits), so that a phase measures the
// controllers and not KCM's default 20 requests a second.
var loadManagerArgs = []string{"--kube-api-qps=5000", "--kube-api-burst=10000"}

// loadPhases are TestLoad's phases, in order.
var loadPhases = []string{"create", "scale up", "rolling update", "scale down", "delete"}

// loadRun is what one controller manager did under TestLoad.
type loadRun struct {
	manager cluster.Manager
	// took and cpu are per phase (loadPhases): the time until every pod
	// was Ready (every Job complete; in the last phase, every pod gone),
	// and the CPU time the controller manager used meanwhile.
	took, cpu []time.Duration
	usage     cluster.Usage
	requests  cluster.Requests
}

// TestLoad puts each controller manager of -cluster.managers (every
// built-in: kubeadm's command line) in charge of the same cluster shape
// under a clusterloader-style load, and reports, side by side with the
// ratio to the reference: per phase the time until every pod is Ready
// and the manager's CPU time; its peak RSS; the requests it made by verb;
// its 409 Conflict answers. The phases, over -cluster.load-pods pods on
// -cluster.load-nodes kwok nodes:
//
//  1. create: Deployments of 100 replicas (four fifths of the pods) and
//     Jobs of 100 completions, 100 at a time (one fifth), all at once;
//  2. scale up: every Deployment to 150 replicas;
//  3. rolling update: every Deployment's template changed (25% surge and
//     unavailability, the default);
//  4. scale down: every Deployment to 50 replicas;
//  5. delete: every Deployment and Job, their dependents left to the
//     garbage collector, until no pod is left.
//
// The controller manager reaches the API server through a witness
// (Cluster.StartReplica) that counts its requests. The test fails if a
// phase does not finish within -cluster.load-deadline; the figures are
// measurements (docs/benchmarks.md), not assertions.
func TestLoad(t *testing.T) {
	if *loadPods < 10 || *loadNodes < 1 {
		t.Fatalf("-cluster.load-pods must be 10 or more and -cluster.load-nodes 1 or more, "+
			"got %d and %d", *loadPods, *loadNodes)
	}
	runs := eachManager(t, runLoad)
	if t.Failed() {
		return
	}
	table := loadTable(runs)
	t.Logf("load: %d nodes, %d pods at first\n%s", *loadNodes, *loadPods, table)
	writeReport(t, fmt.Sprintf("%d kwok nodes, %d pods at first.\n\n%s", *loadNodes, *loadPods,
		table))
}

// loadShape is the workload of TestLoad: how many Deployments and Jobs,
// and the size of each (100, or less for a small run).
type loadShape struct {
	deployments, jobs, size int
}

func newLoadShape(pods int) loadShape {
	size := 100
	if pods < 2000 {
		size = max(pods/20, 2)
	}
	deployed := pods * 4 / 5
	return loadShape{deployments: max(deployed/size, 1), jobs: max((pods-deployed)/size, 1),
		size: size}
}

func runLoad(t *testing.T, m cluster.Manager, binary string) loadRun {
	dir := t.TempDir()
	if *dirFlag != "" {
		dir = *dirFlag + "/load-" + string(m)
	}
	c, err := cluster.Start(t.Context(), cluster.Options{Manager: cluster.None,
		Nodes: *loadNodes, Dir: dir, Logf: t.Logf, StartTimeout: 10 * time.Minute,
		// A /25 a node: room for 500 nodes in the cluster's /16, and 126
		// addresses for a node's 110 pods.
		NodeCIDRMaskSize:   25,
		ExtraSchedulerArgs: []string{"--kube-api-qps=5000", "--kube-api-burst=10000"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx := t.Context()
	r, err := c.StartReplica(ctx, cluster.ReplicaOptions{Name: string(m), Manager: m,
		Binary: binary, ExtraArgs: loadManagerArgs})
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(c.Config())
	l := &loader{t: t, c: c, cs: cs, shape: newLoadShape(*loadPods)}
	l.waitUntil("every node schedulable (node-lifecycle removed the not-ready taint)",
		l.nodesUntainted)
	l.createNamespace()

	run := loadRun{manager: m}
	phase := func(i int, act func(), done func(context.Context) error) {
		before, err := r.Usage()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		act()
		l.waitUntil(loadPhases[i], done)
		took := time.Since(start)
		after, err := r.Usage()
		if err != nil {
			t.Fatal(err)
		}
		run.took = append(run.took, took)
		run.cpu = append(run.cpu, after.CPU-before.CPU)
		t.Logf("%s: %s done in %v, %v of CPU", m, loadPhases[i], took.Round(time.Second),
			(after.CPU - before.CPU).Round(10*time.Millisecond))
	}
	size := int32(l.shape.size)
	phase(0, l.createWorkload, l.settled(size, true))
	phase(1, func() { l.scale(size * 3 / 2) }, l.settled(size*3/2, false))
	phase(2, l.rollOut, l.settled(size*3/2, false))
	phase(3, func() { l.scale(size / 2) }, l.settled(size/2, false))
	phase(4, l.deleteWorkload, l.gone)
	if run.usage, err = r.Usage(); err != nil {
		t.Fatal(err)
	}
	run.requests = r.Requests()
	t.Logf("%s: 409 Conflict answers by client: %s", m, conflictsByClient(c.Writes()))
	if err := c.Alive(); err != nil {
		t.Fatal(err)
	}
	return run
}

// conflictsByClient counts the writes answered 409 by the client that
// sent them (the last part of the User-Agent: KCM's controllers send their
// client's name or ServiceAccount there), most first.
func conflictsByClient(writes []cluster.Write) string {
	counts := map[string]int{}
	for _, w := range writes {
		if w.Code == http.StatusConflict {
			ua := w.UserAgent
			if i := strings.LastIndexByte(ua, '/'); i >= 0 {
				ua = ua[i+1:]
			}
			counts[strings.TrimPrefix(ua, "system:serviceaccount:kube-system:")]++
		}
	}
	clients := slices.Collect(maps.Keys(counts))
	slices.SortFunc(clients, func(a, b string) int {
		return cmp.Or(counts[b]-counts[a], strings.Compare(a, b))
	})
	var parts []string
	for _, c := range clients {
		parts = append(parts, fmt.Sprintf("%s %d", c, counts[c]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// loader drives TestLoad's workload on one cluster.
type loader struct {
	t     *testing.T
	c     *cluster.Cluster
	cs    kubernetes.Interface
	shape loadShape
}

func deploymentName(i int) string { return fmt.Sprintf("load-%d", i) }
func jobName(i int) string        { return fmt.Sprintf("batch-%d", i) }

// waitUntil polls done every loadEvery until it returns nil, failing the
// test after -cluster.load-deadline with its last error.
func (l *loader) waitUntil(what string, done func(ctx context.Context) error) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(l.t.Context(), *loadPhaseDeadline)
	defer cancel()
	tick := time.NewTicker(loadEvery)
	defer tick.Stop()
	for {
		err := done(ctx)
		if err == nil {
			return
		}
		if alive := l.c.Alive(); alive != nil {
			l.t.Fatalf("waiting for %s: %v", what, alive)
		}
		select {
		case <-ctx.Done():
			l.t.Fatalf("waiting %v for %s: %v", *loadPhaseDeadline, what, err)
		case <-tick.C:
		}
	}
}

// nodesUntainted is done once no node carries a taint.
func (l *loader) nodesUntainted(ctx context.Context) error {
	nodes, err := l.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	tainted := 0
	for _, n := range nodes.Items {
		if len(n.Spec.Taints) > 0 {
			tainted++
		}
	}
	if tainted > 0 || len(nodes.Items) < *loadNodes {
		return fmt.Errorf("%d of %d nodes tainted", tainted, len(nodes.Items))
	}
	return nil
}

// createNamespace creates the load's namespace and waits for its default
// ServiceAccount, which its pods need.
func (l *loader) createNamespace() {
	ctx := l.t.Context()
	_, err := l.cs.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: loadNamespace}},
		metav1.CreateOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	l.waitUntil("the load namespace's default ServiceAccount", func(ctx context.Context) error {
		_, err := l.cs.CoreV1().ServiceAccounts(loadNamespace).Get(ctx, "default",
			metav1.GetOptions{})
		return err
	})
}

// createWorkload creates the Deployments and the Jobs.
func (l *loader) createWorkload() {
	ctx := l.t.Context()
	size := int32(l.shape.size)
	for i := range l.shape.deployments {
		labels := map[string]string{"app": deploymentName(i)}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: deploymentName(i)},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(size),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{
						{Name: "pause", Image: "registry.k8s.io/pause:3.10"},
					}},
				},
			},
		}
		if _, err := l.cs.AppsV1().Deployments(loadNamespace).Create(ctx, d,
			metav1.CreateOptions{}); err != nil {
			l.t.Fatal(err)
		}
	}
	for i := range l.shape.jobs {
		// A Job's pod with no command line of its own exits 0 under the
		// cluster's kwok stages, a second or three after it started.
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: jobName(i)},
			Spec: batchv1.JobSpec{
				Completions: ptr.To(size),
				Parallelism: ptr.To(size),
				Template: corev1.PodTemplateSpec{
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{
							{Name: "work", Image: "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"},
						},
					},
				},
			},
		}
		if _, err := l.cs.BatchV1().Jobs(loadNamespace).Create(ctx, j,
			metav1.CreateOptions{}); err != nil {
			l.t.Fatal(err)
		}
	}
}

// scale sets every Deployment's replicas.
func (l *loader) scale(replicas int32) {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	l.patchDeployments(patch)
}

// rollOut changes every Deployment's pod template.
func (l *loader) rollOut() {
	l.patchDeployments([]byte(
		`{"spec":{"template":{"metadata":{"annotations":{"load.ctrlhost.io/revision":"2"}}}}}`))
}

func (l *loader) patchDeployments(patch []byte) {
	for i := range l.shape.deployments {
		if _, err := l.cs.AppsV1().Deployments(loadNamespace).Patch(l.t.Context(),
			deploymentName(i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			l.t.Fatal(err)
		}
	}
}

// settled is done once every Deployment has rolled out replicas pods, all
// of its current template and Ready, and none of an older one left; and,
// with jobs, once every Job is complete.
func (l *loader) settled(replicas int32, jobs bool) func(context.Context) error {
	return func(ctx context.Context) error {
		ds, err := l.cs.AppsV1().Deployments(loadNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pending := 0
		for _, d := range ds.Items {
			s := d.Status
			if s.ObservedGeneration < d.Generation || s.Replicas != replicas ||
				s.UpdatedReplicas != replicas || s.ReadyReplicas != replicas ||
				s.AvailableReplicas != replicas {
				pending++
			}
		}
		if pending > 0 {
			return fmt.Errorf("%d of %d Deployments not rolled out to %d Ready pods", pending,
				len(ds.Items), replicas)
		}
		if !jobs {
			return nil
		}
		js, err := l.cs.BatchV1().Jobs(loadNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		running := 0
		for _, j := range js.Items {
			if !slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
				return c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
			}) {
				running++
			}
		}
		if running > 0 {
			return fmt.Errorf("%d of %d Jobs not complete", running, len(js.Items))
		}
		return nil
	}
}

// deleteWorkload deletes every Deployment and Job, leaving their
// ReplicaSets and pods to the garbage collector (background propagation,
// as kubectl delete does).
func (l *loader) deleteWorkload() {
	ctx := l.t.Context()
	opts := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	for i := range l.shape.deployments {
		err := l.cs.AppsV1().Deployments(loadNamespace).Delete(ctx, deploymentName(i), opts)
		if err != nil && !apierrors.IsNotFound(err) {
			l.t.Fatal(err)
		}
	}
	for i := range l.shape.jobs {
		err := l.cs.BatchV1().Jobs(loadNamespace).Delete(ctx, jobName(i), opts)
		if err != nil && !apierrors.IsNotFound(err) {
			l.t.Fatal(err)
		}
	}
}

// gone is done once no pod and no ReplicaSet is left in the namespace.
func (l *loader) gone(ctx context.Context) error {
	pods, err := l.cs.CoreV1().Pods(loadNamespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	if n := len(pods.Items); n > 0 {
		left := int64(n)
		if pods.RemainingItemCount != nil {
			left += *pods.RemainingItemCount
		}
		return fmt.Errorf("%d pods left", left)
	}
	rss, err := l.cs.AppsV1().ReplicaSets(loadNamespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	if len(rss.Items) > 0 {
		return fmt.Errorf("ReplicaSets left")
	}
	return nil
}

// loadVerbs are the verbs of the table's rows, in order.
var loadVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete",
	"deletecollection", "nonresource"}

// loadTable renders runs as a Markdown table, a column per manager and,
// with two or more, the ratio of each to the first.
func loadTable(runs []loadRun) string {
	var b strings.Builder
	b.WriteString("| |")
	for _, r := range runs {
		fmt.Fprintf(&b, " %s |", r.manager)
	}
	for _, r := range runs[1:] {
		fmt.Fprintf(&b, " %s / %s |", r.manager, runs[0].manager)
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", 2*len(runs)-1) + "\n")
	row := func(name string, value func(loadRun) float64, format string) {
		fmt.Fprintf(&b, "| %s |", name)
		for _, r := range runs {
			fmt.Fprintf(&b, " "+format+" |", value(r))
		}
		for _, r := range runs[1:] {
			b.WriteString(" " + ratio(value(r), value(runs[0])) + " |")
		}
		b.WriteString("\n")
	}
	for i, p := range loadPhases {
		until := "every pod Ready"
		switch p {
		case "create":
			until += ", every Job complete"
		case "delete":
			until = "every pod gone"
		}
		row(p+": until "+until+" (s)", func(r loadRun) float64 { return r.took[i].Seconds() },
			"%.1f")
	}
	for i, p := range loadPhases {
		row(p+": CPU (s)", func(r loadRun) float64 { return r.cpu[i].Seconds() }, "%.1f")
	}
	row("CPU, whole run (s)", func(r loadRun) float64 { return r.usage.CPU.Seconds() }, "%.1f")
	row("peak RSS (MiB)", func(r loadRun) float64 {
		return float64(r.usage.PeakRSS) / (1 << 20)
	}, "%.0f")
	row("requests", func(r loadRun) float64 { return float64(r.requests.Total()) }, "%.0f")
	for _, v := range loadVerbs {
		row("requests: "+v, func(r loadRun) float64 {
			return float64(r.requests.ByVerb[v])
		}, "%.0f")
	}
	row("409 Conflict answers", func(r loadRun) float64 {
		return float64(r.requests.Conflicts)
	}, "%.0f")
	row("429 answers", func(r loadRun) float64 { return float64(r.requests.Throttled) }, "%.0f")
	return b.String()
}

// ratio is a/b as "1.23x", or "–" when b is 0.
func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2fx", a/b)
}
