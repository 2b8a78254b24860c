//go:build integration

package differential_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// There is no kubelet (nor scheduler) on testenv: scenarios play their
// part with these. Each writes only what a kubelet or scheduler would, so
// both sides see the same pod lifecycle.

// runReady marks every live pod of ns that is not yet Running as Running
// and Ready (its containers started and ready), as a kubelet would once
// the pod's containers passed their readiness probes.
func runReady(ctx context.Context, cs kubernetes.Interface, ns string) error {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range l.Items {
		p := &l.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase != "" && p.Status.Phase != corev1.PodPending {
			continue
		}
		if err := setPhase(ctx, cs, p, corev1.PodRunning, 0); err != nil {
			return err
		}
	}
	return nil
}

// bindToTarget binds every unbound pod of ns that targets one node through
// a required node-affinity term on metadata.name (as DaemonSet pods do) to
// that node, as the scheduler would.
func bindToTarget(ctx context.Context, cs kubernetes.Interface, ns string) error {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range l.Items {
		p := &l.Items[i]
		node := targetNode(p)
		if p.Spec.NodeName != "" || node == "" || p.DeletionTimestamp != nil {
			continue
		}
		err := cs.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("binding pod %s to %s: %w", p.Name, node, err)
		}
	}
	return nil
}

func targetNode(p *corev1.Pod) string {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// setPhase writes the status a kubelet reports for p in phase: Running
// makes it and its containers ready; Succeeded and Failed terminate every
// container with exitCode (0 for Succeeded).
func setPhase(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, phase corev1.PodPhase, exitCode int32) error {
	now := metav1.Now()
	p = p.DeepCopy()
	p.Status.Phase = phase
	p.Status.StartTime = &now
	ready := corev1.ConditionFalse
	if phase == corev1.PodRunning {
		ready = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: ready, LastTransitionTime: now},
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		st := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: phase == corev1.PodRunning}
		if phase == corev1.PodRunning {
			st.Started = new(true)
			st.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
		} else {
			st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: exitCode, StartedAt: now, FinishedAt: now,
				Reason: map[bool]string{true: "Completed", false: "Error"}[exitCode == 0]}
		}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, st)
	}
	_, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}
