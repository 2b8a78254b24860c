//go:build integration

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// TestDeploymentRollout: a Deployment of 3 becomes Available once its
// ReplicaSet's pods are ready; a template change rolls out through a new
// ReplicaSet and scales the old one to 0.
func TestDeploymentRollout(t *testing.T) {
	t.Parallel()
	cs, ns := setup(t)
	ctx := t.Context()
	sel := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: podTemplate(sel, corev1.RestartPolicyAlways),
		},
	}
	d, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rolledOut(t, cs, ns, d.Name, 3)
	first := replicaSets(t, cs, ns)
	if len(first) != 1 {
		t.Fatalf("%d ReplicaSets after the first rollout, want 1", len(first))
	}

	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Annotations = map[string]string{"e2e.ctrlhost.io/revision": "2"}
		_, err = cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rolledOut(t, cs, ns, d.Name, 3)
	eventually(t, waitTimeout, "the old ReplicaSet to be scaled to 0 beside the new one", func(context.Context) error {
		rss := replicaSets(t, cs, ns)
		if len(rss) != 2 {
			return fmt.Errorf("%d ReplicaSets, want 2", len(rss))
		}
		for _, rs := range rss {
			want := int32(3)
			if rs.UID == first[0].UID {
				want = 0
			}
			if *rs.Spec.Replicas != want || rs.Status.Replicas != want {
				return fmt.Errorf("ReplicaSet %s: spec %d, status %d replicas, want %d", rs.Name, *rs.Spec.Replicas, rs.Status.Replicas, want)
			}
		}
		return nil
	})
}

// rolledOut plays the kubelet for the Deployment's pods (each is marked
// ready as it appears) until the Deployment reports a complete rollout of
// replicas, Available.
func rolledOut(t *testing.T, cs kubernetes.Interface, ns, name string, replicas int32) {
	t.Helper()
	eventually(t, waitTimeout, "Deployment "+name+" to roll out", func(ctx context.Context) error {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := markPods(ctx, cs, ns, d.Spec.Selector.MatchLabels, ready); err != nil {
			return err
		}
		st := d.Status
		if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != replicas ||
			st.AvailableReplicas != replicas || st.Replicas != replicas {
			return fmt.Errorf("generation %d observed %d, replicas %d updated %d available %d, want %d",
				d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.AvailableReplicas, replicas)
		}
		if c := deploymentCondition(d, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue {
			return fmt.Errorf("condition Available: %v", c)
		}
		if c := deploymentCondition(d, appsv1.DeploymentProgressing); c == nil || c.Reason != "NewReplicaSetAvailable" {
			return fmt.Errorf("condition Progressing: %v, want reason NewReplicaSetAvailable", c)
		}
		return nil
	})
}

func deploymentCondition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

func replicaSets(t *testing.T, cs kubernetes.Interface, ns string) []appsv1.ReplicaSet {
	t.Helper()
	l, err := cs.AppsV1().ReplicaSets(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestJobComplete: a Job of 2 completions is Complete once its pods
// succeed.
func TestJobComplete(t *testing.T) {
	t.Parallel()
	cs, ns := setup(t)
	job := newJob("done", 2, 6)
	if _, err := cs.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "Job done to complete", func(ctx context.Context) error {
		if err := markPods(ctx, cs, ns, map[string]string{"job-name": "done"}, terminated(corev1.PodSucceeded)); err != nil {
			return err
		}
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, "done", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := jobCondition(j, batchv1.JobComplete); c == nil || c.Status != corev1.ConditionTrue {
			return fmt.Errorf("condition Complete: %v; succeeded %d", c, j.Status.Succeeded)
		}
		if j.Status.Succeeded != 2 || j.Status.Failed != 0 || j.Status.CompletionTime == nil {
			return fmt.Errorf("succeeded %d, failed %d, completion time %v; want 2, 0, set", j.Status.Succeeded, j.Status.Failed, j.Status.CompletionTime)
		}
		return nil
	})
}

// TestJobBackoffLimitExceeded: a Job with backoffLimit 1 whose pods fail is
// retried once (after upstream's fixed 10s pod-failure backoff), then
// Failed with reason BackoffLimitExceeded.
func TestJobBackoffLimitExceeded(t *testing.T) {
	t.Parallel()
	cs, ns := setup(t)
	job := newJob("doomed", 1, 1)
	if _, err := cs.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "Job doomed to fail", func(ctx context.Context) error {
		if err := markPods(ctx, cs, ns, map[string]string{"job-name": "doomed"}, terminated(corev1.PodFailed)); err != nil {
			return err
		}
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, "doomed", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := jobCondition(j, batchv1.JobFailed)
		if c == nil || c.Status != corev1.ConditionTrue || c.Reason != batchv1.JobReasonBackoffLimitExceeded {
			return fmt.Errorf("condition Failed: %v, want True with reason %s; failed pods %d", c, batchv1.JobReasonBackoffLimitExceeded, j.Status.Failed)
		}
		if j.Status.Failed != 2 || j.Status.Succeeded != 0 {
			return fmt.Errorf("failed %d, succeeded %d; want 2 (the pod and its one retry), 0", j.Status.Failed, j.Status.Succeeded)
		}
		return nil
	})
}

func newJob(name string, completions, backoffLimit int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Completions:  new(completions),
			Parallelism:  new(completions),
			BackoffLimit: new(backoffLimit),
			Template:     podTemplate(map[string]string{"job": name}, corev1.RestartPolicyNever),
		},
	}
}

func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == typ {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// TestDaemonSetOverNodes: a DaemonSet selecting two Ready Nodes gets one
// pod per Node, each pinned to its Node by node affinity.
func TestDaemonSetOverNodes(t *testing.T) {
	t.Parallel()
	cs, ns := setup(t)
	ctx := t.Context()
	nodeSel := map[string]string{"e2e.ctrlhost.io/scenario": ns}
	nodes := []string{ns + "-a", ns + "-b"}
	for _, n := range nodes {
		readyNode(t, cs, n, nodeSel)
	}
	sel := map[string]string{"app": "agent"}
	tmpl := podTemplate(sel, corev1.RestartPolicyAlways)
	tmpl.Spec.NodeSelector = nodeSel
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: tmpl,
		},
	}
	ds, err := cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, waitTimeout, "one daemon pod per Node", func(ctx context.Context) error {
		got, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if st := got.Status; st.DesiredNumberScheduled != 2 || st.CurrentNumberScheduled != 2 || st.ObservedGeneration < got.Generation {
			return fmt.Errorf("desired %d, current %d scheduled, want 2, 2", st.DesiredNumberScheduled, st.CurrentNumberScheduled)
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
		if err != nil {
			return err
		}
		var pinned []string
		for _, p := range pods.Items {
			if !slices.ContainsFunc(p.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == ds.UID }) {
				return fmt.Errorf("pod %s is not owned by the DaemonSet", p.Name)
			}
			pinned = append(pinned, affinityNode(&p))
		}
		slices.Sort(pinned)
		if !slices.Equal(pinned, nodes) {
			return fmt.Errorf("pods pinned by affinity to %q, want one on each of %q", pinned, nodes)
		}
		return nil
	})
}

// affinityNode is the one Node a daemon pod's required node affinity
// allows, or "" if it does not have that shape.
func affinityNode(p *corev1.Pod) string {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchFields) != 1 {
		return ""
	}
	f := terms[0].MatchFields[0]
	if f.Key != "metadata.name" || f.Operator != corev1.NodeSelectorOpIn || len(f.Values) != 1 {
		return ""
	}
	return f.Values[0]
}

// readyNode creates a Node with a Ready condition, as a kubelet would
// register it.
func readyNode(t *testing.T, cs kubernetes.Interface, name string, lbls map[string]string) {
	t.Helper()
	ctx := t.Context()
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// KCM's node controllers write to a new Node too (the TTL annotation).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		n.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
		n.Status.Allocatable = n.Status.Capacity
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// podTemplate is a one-container template that no kubelet will run.
func podTemplate(lbls map[string]string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: lbls},
		Spec: corev1.PodSpec{
			RestartPolicy:                 restart,
			TerminationGracePeriodSeconds: new(int64(0)),
			Containers:                    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// A podStatus sets what a kubelet would report for p; it returns false
// when p already has it.
type podStatus func(p *corev1.Pod) bool

// ready: Running, with the Ready and ContainersReady conditions.
func ready(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodRunning && podReady(p) {
		return false
	}
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	return true
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// terminated: the given terminal phase, its container ended.
func terminated(phase corev1.PodPhase) podStatus {
	return func(p *corev1.Pod) bool {
		if p.Status.Phase == phase {
			return false
		}
		now := metav1.Now()
		code := int32(0)
		if phase == corev1.PodFailed {
			code = 1
		}
		p.Status.Phase = phase
		p.Status.StartTime = &now
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "c", Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, StartedAt: now, FinishedAt: now,
			}},
		}}
		return true
	}
}

// markPods applies status to every live pod matching sel whose status it
// changes. A pod deleted meanwhile is no error.
func markPods(ctx context.Context, cs kubernetes.Interface, ns string, sel map[string]string, status podStatus) error {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return err
	}
	var errs []error
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || !status(p) {
			continue
		}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil && !isGoneOrConflict(err) {
			errs = append(errs, fmt.Errorf("pod %s status: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}
