package replicaset

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestRCConversion(t *testing.T) {
	rc := newRC("legacy", 3, func(rc *corev1.ReplicationController) {
		rc.Labels = map[string]string{"l": "v"}
		rc.Spec.MinReadySeconds = 7
		rc.Status = corev1.ReplicationControllerStatus{
			Replicas: 3, FullyLabeledReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, ObservedGeneration: 4,
			Conditions: []corev1.ReplicationControllerCondition{{
				Type: corev1.ReplicationControllerReplicaFailure, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(
					epoch.Truncate(time.Second),
				), Reason: "FailedCreate", Message: "m",
			}},
		}
	})
	orig := rc.DeepCopy()
	rs := rcToRS(rc)
	if *rs.Spec.Replicas != 3 || rs.Spec.MinReadySeconds != 7 || rs.Spec.Selector.MatchLabels["app"] != "web" ||
		rs.Spec.Template.Labels["app"] != "web" || rs.Status.ReadyReplicas != 1 ||
		len(rs.Status.Conditions) != 1 {
		t.Errorf("rcToRS = %+v", rs)
	}
	rs.Labels["l"] = "changed"
	rs.Spec.Selector.MatchLabels["app"] = "changed"
	if !equality.Semantic.DeepEqual(rc, orig) {
		t.Fatal("rcToRS shares memory with the ReplicationController")
	}
	back := rsToRC(rcToRS(rc))
	if !equality.Semantic.DeepEqual(back, orig) {
		t.Errorf("round trip changed the ReplicationController:\n got %+v\nwant %+v", back, orig)
	}
}

func TestRCConversionDefaults(t *testing.T) {
	rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	rs := rcToRS(rc)
	if ptr.Deref(rs.Spec.Replicas, 0) != 1 {
		t.Errorf("nil replicas became %v, want the API default 1", rs.Spec.Replicas)
	}
	if rs.Spec.Selector != nil {
		t.Errorf("an empty selector became %+v, want nil (selects nothing)", rs.Spec.Selector)
	}
	if _, err := selectorOf(rs); err == nil {
		t.Error("selectorOf accepted a missing selector")
	}
	if back := rsToRC(rs); back.Spec.Template != nil {
		t.Errorf("a missing template came back as %+v", back.Spec.Template)
	}
}
