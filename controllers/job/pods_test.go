package job

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Pod fixtures for the functions that read a pod's spec and status; the
// tests hand the pods over cached, as the pod informer holds them.

type podMods = []func(*corev1.Pod)

// withSidecar gives a pod a plain init container "init" and a sidecar
// "side" (an init container with restartPolicy Always).
func withSidecar(p *corev1.Pod) {
	p.Spec.InitContainers = []corev1.Container{
		{Name: "init"},
		{Name: "side", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
	}
}

// initStatus adds the status of init container name: its restarts, and
// terminated at t unless t is zero.
func initStatus(name string, restarts int32, t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		s := corev1.ContainerStatus{Name: name, RestartCount: restarts}
		if !t.IsZero() {
			s.State.Terminated = &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(t)}
		}
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, s)
	}
}

func onNode(p *corev1.Pod) { p.Spec.NodeName = "node" }

func createdAt(t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

func restartsOf(n int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: n}}
	}
}

func runningUnready(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }

// TestSortForDeletion: unscheduled before scheduled, pending before
// running, not ready before ready, more restarts first (regular ones, then
// sidecars'; plain init containers' do not count), newer first.
func TestSortForDeletion(t *testing.T) {
	j := newJob("work")
	older, newer := createdAt(epoch.Add(-time.Hour)), createdAt(epoch)
	none := time.Time{}
	tests := []struct {
		name        string
		first, then podMods
	}{
		{"unscheduled first", podMods{older}, podMods{onNode, newer}},
		{"pending before running", podMods{onNode, older}, podMods{onNode, running, newer}},
		{"not ready before ready", podMods{onNode, runningUnready, older},
			podMods{onNode, running, newer}},
		{"more restarts first", podMods{onNode, running, older, restartsOf(2)},
			podMods{onNode, running, newer, restartsOf(1)}},
		{"then more sidecar restarts", podMods{onNode, running, older, withSidecar,
			initStatus("init", 0, none), initStatus("side", 3, none)},
			podMods{onNode, running, newer, withSidecar, initStatus("side", 1, none)}},
		{"plain init containers' restarts do not count", podMods{onNode, running, newer},
			podMods{onNode, running, older, withSidecar, initStatus("init", 5, none)}},
		{"newer first", podMods{onNode, running, newer}, podMods{onNode, running, older}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := cached(t, newPod("then", j, tt.then...), newPod("first", j, tt.first...))
			for range 2 {
				sortForDeletion(pods)
				if got := []string{pods[0].Name, pods[1].Name}; got[0] != "first" {
					t.Fatalf("order %v, want [first then]", got)
				}
				slices.Reverse(pods)
			}
		})
	}
}

// TestFinishTime: the latest finish of the containers and sidecars once
// all of them terminated (plain init containers do not count); else when
// the pod stopped being ready; else its deletion less its grace period;
// else its creation.
func TestFinishTime(t *testing.T) {
	j := newJob("work")
	t1, t2 := epoch.Add(time.Minute), epoch.Add(2*time.Minute)
	failedAt := finished(corev1.PodFailed, 1, t1)
	notReadySince := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady,
			Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(epoch)}}
	}
	deleted := func(p *corev1.Pod) {
		p.DeletionTimestamp = ptr.To(epochTime())
		p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	}
	tests := []struct {
		name string
		mods podMods
		want time.Time
	}{
		{"containers finished", podMods{failedAt}, t1},
		{"a sidecar finished last", podMods{failedAt, withSidecar,
			initStatus("init", 0, t2.Add(time.Hour)), initStatus("side", 0, t2)}, t2},
		{"a plain init container is no sidecar", podMods{failedAt, withSidecar,
			initStatus("init", 0, t2)}, t1},
		{"a sidecar still running: when it stopped being ready", podMods{failedAt, withSidecar,
			initStatus("side", 0, time.Time{}), notReadySince}, epoch},
		{"being deleted: less the grace period", podMods{deleted}, epoch.Add(-30 * time.Second)},
		{"else its creation", nil, epoch.Add(-time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := finishTime(cached(t, newPod("p", j, tt.mods...))[0]); !got.Equal(tt.want) {
				t.Errorf("finishTime %v, want %v", got, tt.want)
			}
		})
	}
}
