package intern_test

import (
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/informers/internal/intern"
)

// decoded returns a pod as a decoder makes it: every string a copy of its
// own.
func decoded(name string) *corev1.Pod {
	c := func(s string) string { return string([]byte(s)) }
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: c(name), Namespace: c("ns"), UID: "u-" + "1",
			Labels:          map[string]string{c("app"): c("web")},
			OwnerReferences: []metav1.OwnerReference{{Kind: c("ReplicaSet"), Name: c("web-1")}}},
		Spec: corev1.PodSpec{
			NodeName: c("node-1"),
			Containers: []corev1.Container{{Name: c("c"), Image: c("nginx"),
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceName(c("cpu")): resource.MustParse("100m")}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPhase(c("Running")), PodIP: c("10.0.0.1"),
			Conditions: []corev1.PodCondition{{Type: corev1.PodConditionType(c("Ready"))}}},
	}
}

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestApplySharesRepeatedStrings(t *testing.T) {
	a, b := decoded("a"), decoded("b")
	want := a.DeepCopy()
	intern.Apply(a)
	intern.Apply(b)
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("interning changed the pod:\n got %+v\nwant %+v", a, want)
	}
	shared := map[string][2]string{
		"metadata.namespace":               {a.Namespace, b.Namespace},
		"metadata.ownerReferences[0].kind": {a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
		"spec.nodeName":                    {a.Spec.NodeName, b.Spec.NodeName},
		"spec.containers[0].image":         {a.Spec.Containers[0].Image, b.Spec.Containers[0].Image},
		"status.phase":                     {string(a.Status.Phase), string(b.Status.Phase)},
		"status.conditions[0].type": {string(a.Status.Conditions[0].Type),
			string(b.Status.Conditions[0].Type)},
	}
	for k := range a.Labels {
		for l := range b.Labels {
			shared["a label key"] = [2]string{k, l}
		}
	}
	shared["a label value"] = [2]string{a.Labels["app"], b.Labels["app"]}
	for k := range a.Spec.Containers[0].Resources.Requests {
		for l := range b.Spec.Containers[0].Resources.Requests {
			shared["a resource name"] = [2]string{string(k), string(l)}
		}
	}
	for what, s := range shared {
		if !same(s[0], s[1]) {
			t.Errorf("%s: %q not shared", what, s[0])
		}
	}
}

func TestApplyLeavesStringsOfOneObjectAlone(t *testing.T) {
	a, b := decoded("same"), decoded("same")
	intern.Apply(a)
	intern.Apply(b)
	for what, s := range map[string][2]string{
		"metadata.name": {a.Name, b.Name},
		"status.podIP":  {a.Status.PodIP, b.Status.PodIP},
	} {
		if same(s[0], s[1]) {
			t.Errorf("%s: %q interned, though it names one object", what, s[0])
		}
	}
}

func TestApplyLeavesOtherValuesAlone(t *testing.T) {
	intern.Apply(nil)
	intern.Apply((*corev1.Pod)(nil))
	intern.Apply(corev1.Pod{})
	intern.Apply(new(int))
}

func BenchmarkApplyPod(b *testing.B) {
	pods := make([]*corev1.Pod, b.N)
	for i := range pods {
		pods[i] = decoded("p")
	}
	b.ResetTimer()
	for i := range b.N {
		intern.Apply(pods[i])
	}
}
