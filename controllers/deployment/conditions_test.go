package deployment

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestSetCondition: same status and reason change nothing (not even the
// times); a new reason with the same status keeps lastTransitionTime; a new
// status moves it; the set condition goes last.
func TestSetCondition(t *testing.T) {
	t0, t1 := epoch, epoch.Add(time.Minute)
	base := func() appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
			newCondition(
				appsv1.DeploymentProgressing,
				corev1.ConditionTrue,
				reasonReplicaSetUpdated,
				"a",
				t0,
			),
			newCondition(
				appsv1.DeploymentAvailable,
				corev1.ConditionFalse,
				reasonMinimumUnavailable,
				"b",
				t0,
			),
		}}
	}
	tests := []struct {
		name                    string
		set                     appsv1.DeploymentCondition
		wantReason              string
		wantUpdate, wantTransit time.Time
		wantLastType            appsv1.DeploymentConditionType
	}{
		{
			"same status and reason",
			newCondition(
				appsv1.DeploymentProgressing,
				corev1.ConditionTrue,
				reasonReplicaSetUpdated,
				"new message",
				t1,
			),
			reasonReplicaSetUpdated,
			t0,
			t0,
			appsv1.DeploymentAvailable,
		},
		{
			"same status, new reason",
			newCondition(
				appsv1.DeploymentProgressing,
				corev1.ConditionTrue,
				reasonNewRSAvailable,
				"m",
				t1,
			),
			reasonNewRSAvailable,
			t1,
			t0,
			appsv1.DeploymentProgressing,
		},
		{
			"new status",
			newCondition(
				appsv1.DeploymentProgressing,
				corev1.ConditionFalse,
				reasonTimedOut,
				"m",
				t1,
			),
			reasonTimedOut,
			t1,
			t1,
			appsv1.DeploymentProgressing,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := base()
			setCondition(&st, tt.set)
			c := getCondition(st, appsv1.DeploymentProgressing)
			if c.Reason != tt.wantReason || !c.LastUpdateTime.Time.Equal(tt.wantUpdate) ||
				!c.LastTransitionTime.Time.Equal(tt.wantTransit) {
				t.Errorf("condition %+v", c)
			}
			if last := st.Conditions[len(st.Conditions)-1].Type; last != tt.wantLastType ||
				len(st.Conditions) != 2 {
				t.Errorf("conditions %+v", st.Conditions)
			}
		})
	}
}

// TestTimedOut: only a Progressing condition older than the deadline times
// out; a finished rollout's never does; no deadline, never.
func TestTimedOut(t *testing.T) {
	d := rolling(1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](10)
	noDeadline := d.DeepCopy()
	noDeadline.Spec.ProgressDeadlineSeconds = ptr.To[int32](1<<31 - 1)
	cond := func(reason string, at time.Time) *appsv1.DeploymentStatus {
		return &appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
			{
				Type:           appsv1.DeploymentProgressing,
				Reason:         reason,
				LastUpdateTime: metav1.NewTime(at),
			},
		}}
	}
	now := epoch.Add(time.Hour)
	tests := []struct {
		name string
		d    *appsv1.Deployment
		st   *appsv1.DeploymentStatus
		want bool
	}{
		{"no condition", d, &appsv1.DeploymentStatus{}, false},
		{"within the deadline", d, cond(reasonReplicaSetUpdated, now.Add(-10*time.Second)), false},
		{"past the deadline", d, cond(reasonReplicaSetUpdated, now.Add(-11*time.Second)), true},
		{"finished long ago", d, cond(reasonNewRSAvailable, now.Add(-time.Hour)), false},
		{"already timed out", d, cond(reasonTimedOut, now), true},
		{
			"deadline MaxInt32 means none",
			noDeadline,
			cond(reasonReplicaSetUpdated, now.Add(-time.Hour)),
			false,
		},
	}
	for _, tt := range tests {
		if got := timedOut(tt.d, tt.st, now); got != tt.want {
			t.Errorf("%s: timedOut = %v, want %v", tt.name, got, tt.want)
		}
	}
}
