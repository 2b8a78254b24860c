package differential_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

func side(ns, suffix, uid, image string) []runtime.Object {
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-" + suffix, GenerateName: "web-", Namespace: ns, UID: types.UID(uid), ResourceVersion: "42",
			CreationTimestamp: metav1.Now(),
			OwnerReferences:   []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web", UID: types.UID(uid)}},
			Labels:            map[string]string{"controller-uid": "d3f50901-8eb0-426d-90b7-b1fd6bca63a0"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}},
			Volumes: []corev1.Volume{{Name: "kube-api-access-" + suffix[:5]}}},
	}
	return []runtime.Object{p}
}

// TestNormaliseAndDiff: what differs between any two runs (namespace,
// generated names, uids, versions, times, API-server volume names) is
// normalised away; a real difference is reported with both sides' lines.
func TestNormaliseAndDiff(t *testing.T) {
	a := differential.Normalise(side("diff-native-aaaaa", "x7k2pq", "11111111-1111-1111-1111-111111111111", "img:1"), "diff-native-aaaaa", nil)
	b := differential.Normalise(side("diff-upstream-bbbbb", "m3n4bz", "22222222-2222-2222-2222-222222222222", "img:1"), "diff-upstream-bbbbb", nil)
	if d := (differential.Result{Native: a, Upstream: b}).Diff(); d != "" {
		t.Errorf("runs that differ only in identity, time and generated names differ after Normalise:\n%s", d)
	}
	c := differential.Normalise(side("diff-upstream-bbbbb", "m3n4bz", "22222222-2222-2222-2222-222222222222", "img:2"), "diff-upstream-bbbbb", nil)
	d := (differential.Result{Native: a, Upstream: c}).Diff()
	if !strings.Contains(d, `native:`) || !strings.Contains(d, `"img:1"`) || !strings.Contains(d, `"img:2"`) {
		t.Errorf("a real difference (the image) is not reported:\n%s", d)
	}
	if got := differential.Normalise(side("ns-1", "x7k2pq", "u", "i"), "ns-1", []string{"spec"}); got[0]["spec"] != nil {
		t.Error("an ignored field survived Normalise")
	}
}

// TestNormaliseOrdersGeneratedNamesByContent: two generated pods that
// differ only in phase get the same ordinals on both sides, whichever
// suffix the API server drew for which (sorting by suffix swapped them).
func TestNormaliseOrdersGeneratedNamesByContent(t *testing.T) {
	pods := func(ns, running, succeeded string) []runtime.Object {
		mk := func(name string, phase corev1.PodPhase) *corev1.Pod {
			return &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: "job-", Namespace: ns},
				Status:     corev1.PodStatus{Phase: phase}}
		}
		return []runtime.Object{mk(running, corev1.PodRunning), mk(succeeded, corev1.PodSucceeded)}
	}
	a := differential.Normalise(pods("ns-a", "job-aaaaa", "job-zzzzz"), "ns-a", nil)
	b := differential.Normalise(pods("ns-b", "job-zzzzz", "job-aaaaa"), "ns-b", nil)
	if d := (differential.Result{Native: a, Upstream: b}).Diff(); d != "" {
		t.Errorf("pods differing only in phase swapped places with their suffixes:\n%s", d)
	}
}
