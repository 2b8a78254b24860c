package podstate_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podstate"
)

func TestPodState(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	deleted := metav1.NewTime(now)
	ready := func(since time.Duration) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now.Add(-since)),
		}}}
	}
	tests := []struct {
		name                                string
		pod                                 corev1.Pod
		active, terminating, isReady, avail bool // avail: with minReadySeconds 10
	}{
		{"pending", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}},
			true, false, false, false},
		{"ready for 5s", corev1.Pod{Status: ready(5 * time.Second)}, true, false, true, false},
		{"ready for 10s", corev1.Pod{Status: ready(10 * time.Second)}, true, false, true, true},
		{"succeeded", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
			false, false, false, false},
		{"being deleted", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleted},
			Status: ready(time.Minute)}, false, true, true, true},
		{"failed and deleted", corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleted},
			Status:     corev1.PodStatus{Phase: corev1.PodFailed}}, false, false, false, false},
	}
	for _, tt := range tests {
		p := &tt.pod
		if got := podstate.IsActive(p); got != tt.active {
			t.Errorf("%s: IsActive = %v", tt.name, got)
		}
		if got := podstate.IsTerminating(p); got != tt.terminating {
			t.Errorf("%s: IsTerminating = %v", tt.name, got)
		}
		if got := podstate.IsReady(p); got != tt.isReady {
			t.Errorf("%s: IsReady = %v", tt.name, got)
		}
		if got := podstate.IsAvailable(p, 10, now); got != tt.avail {
			t.Errorf("%s: IsAvailable(10s) = %v", tt.name, got)
		}
		if podstate.IsReady(p) && !podstate.IsAvailable(p, 0, now) {
			t.Errorf("%s: ready but not available with minReadySeconds 0", tt.name)
		}
	}
}
