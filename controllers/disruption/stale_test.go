package disruption

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

func disruptionTargetSince(since time.Duration, status corev1.ConditionStatus,
	reason string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.DisruptionTarget, Status: status, Reason: reason,
			Message: "evicted", LastTransitionTime: at(since)})
	}
}

func TestStaleDisruptionTarget(t *testing.T) {
	evicted := disruptionTargetSince(-3*time.Minute, corev1.ConditionTrue,
		"EvictionByEvictionAPI")
	tests := []struct {
		name      string
		pod       *corev1.Pod
		wantReset bool
		wantLater time.Duration // a requeue; 0: none
	}{
		{name: "stale: reset", pod: newPod("p", evicted), wantReset: true},
		{name: "not yet stale: requeued for when it is",
			pod: newPod("p", disruptionTargetSince(-30*time.Second, corev1.ConditionTrue,
				"EvictionByEvictionAPI")),
			wantLater: 90 * time.Second},
		{name: "the kubelet's: never stale",
			pod: newPod("p", disruptionTargetSince(-time.Hour, corev1.ConditionTrue,
				corev1.PodReasonTerminationByKubelet))},
		{name: "being deleted: left", pod: newPod("p", evicted, deleting)},
		{name: "terminal: left",
			pod: newPod("p", evicted, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })},
		{name: "False already: left",
			pod: newPod("p", disruptionTargetSince(-time.Hour, corev1.ConditionFalse, ""))},
		{name: "no condition: left", pod: newPod("p")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.pod)
			// The handler schedules a candidate for when it goes stale.
			f.c.addPod(controllertest.Pruned(t, Descriptor(NewOptions()), tt.pod)[0])
			candidate := tt.wantReset || tt.wantLater > 0
			if got := len(f.stales) == 1; got != candidate {
				t.Fatalf("handler scheduled %v, want a candidate: %v", f.stales, candidate)
			}
			if candidate && f.stales[0].After != tt.wantLater {
				t.Errorf("scheduled after %v, want %v", f.stales[0].After, tt.wantLater)
			}
			f.stales = nil
			if err := f.c.syncStalePod(t.Context(), ns+"/p"); err != nil {
				t.Fatal(err)
			}
			patches := controllertest.CountActions(f.client, "patch", "pods")
			if (patches == 1) != tt.wantReset || patches > 1 {
				t.Fatalf("%d patches, want a reset: %v", patches, tt.wantReset)
			}
			var wantLater controllertest.Requeues
			if tt.wantLater > 0 {
				wantLater = controllertest.Requeues{{Key: ns + "/p", After: tt.wantLater}}
			}
			if !slices.Equal(f.stales, wantLater) {
				t.Errorf("requeues %v, want %v", f.stales, wantLater)
			}
			if !tt.wantReset {
				return
			}
			got, err := f.client.CoreV1().Pods(ns).Get(t.Context(), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The patch carries conditions only: what the cache pruned (the
			// pod's IP) is left as it was.
			want := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse,
					ObservedGeneration: 3, LastTransitionTime: at(0)}}
			if !conditionsEqual(got.Status.Conditions, want) || got.Status.PodIP != "10.0.0.1" {
				t.Errorf("pod status %+v, want conditions %+v and the IP kept", got.Status, want)
			}
		})
	}
	f := newFixture(t)
	if err := f.c.syncStalePod(t.Context(), ns+"/gone"); err != nil {
		t.Errorf("sync of a gone pod = %v, want nil", err)
	}
}

func conditionsEqual(a, b []corev1.PodCondition) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.PodCondition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason &&
			x.Message == y.Message && x.ObservedGeneration == y.ObservedGeneration &&
			x.LastTransitionTime.Equal(&y.LastTransitionTime)
	})
}

func TestConditionsPatchCarriesTheUID(t *testing.T) {
	old := newPod("p", disruptionTargetSince(0, corev1.ConditionTrue, "x")).Status
	updated := *old.DeepCopy()
	updated.Conditions[1].Status = corev1.ConditionFalse
	patch, err := conditionsPatch(types.UID("u-1"), old, updated)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"uid":"u-1"`, `"status":"False"`, `"type":"DisruptionTarget"`} {
		if !strings.Contains(string(patch), want) {
			t.Errorf("patch %s lacks %s", patch, want)
		}
	}
}
