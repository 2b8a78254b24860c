package prune_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/informers/internal/prune"
)

var podType = reflect.TypeFor[corev1.Pod]()

func pod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "7",
			Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName:      "node-1",
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{
				Name:  "c",
				Image: "nginx",
				Env:   []corev1.EnvVar{{Name: "A", Value: "1"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m")}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
			}, {Name: "d", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: new(int64(1))},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
}

func TestApplyKeepsWhatPathsName(t *testing.T) {
	cases := []struct {
		name  string
		paths []string
		want  func(p *corev1.Pod)
	}{{
		name:  "metadata only",
		paths: nil,
		want: func(p *corev1.Pod) {
			p.Spec, p.Status = corev1.PodSpec{}, corev1.PodStatus{}
		},
	}, {
		name:  "one field of spec, status whole",
		paths: []string{"spec.nodeName", "status"},
		want: func(p *corev1.Pod) {
			p.Spec = corev1.PodSpec{NodeName: "node-1"}
		},
	}, {
		name:  "a field of each list element",
		paths: []string{"spec.containers.name", "spec.containers.ports"},
		want: func(p *corev1.Pod) {
			p.Spec = corev1.PodSpec{Containers: []corev1.Container{
				{Name: "c", Ports: p.Spec.Containers[0].Ports}, {Name: "d"}}}
			p.Status = corev1.PodStatus{}
		},
	}, {
		name:  "through a pointer",
		paths: []string{"spec.securityContext.runAsUser"},
		want: func(p *corev1.Pod) {
			p.Spec = corev1.PodSpec{SecurityContext: p.Spec.SecurityContext}
			p.Status = corev1.PodStatus{}
		},
	}, {
		name:  "through an inline struct",
		paths: []string{"spec.volumes.emptyDir"},
		want: func(p *corev1.Pod) {
			p.Spec = corev1.PodSpec{Volumes: []corev1.Volume{{VolumeSource: p.Spec.Volumes[0].VolumeSource}}}
			p.Status = corev1.PodStatus{}
		},
	}, {
		name:  "a path under another is the other",
		paths: []string{"spec", "spec.nodeName", "status.phase"},
		want: func(p *corev1.Pod) {
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := prune.Compile(podType, tc.paths)
			if err != nil {
				t.Fatal(err)
			}
			got, want := pod(), pod()
			tc.want(want)
			plan.Apply(got)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("pruned to %v:\n got %+v\nwant %+v", plan, got, want)
			}
		})
	}
}

func TestCompileRejectsPathsThatNameNoField(t *testing.T) {
	cases := []struct{ path, want string }{
		{"spec.nodename", `PodSpec has no field "nodename" (it has `},
		{"spec.nodeSelector.zone", `spec.nodeSelector is map[string]string, which has no fields`},
		{"spec..nodeName", `PodSpec has no field ""`},
		{"", `an empty field path for Pod`},
	}
	for _, tc := range cases {
		_, err := prune.Compile(podType, []string{tc.path})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%q) = %v, want an error containing %q", tc.path, err, tc.want)
		}
	}
}

func TestCoversAndUnion(t *testing.T) {
	must := func(paths ...string) *prune.Plan {
		p, err := prune.Compile(podType, paths)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	all := prune.All(podType)
	node, status := must("spec.nodeName"), must("status")
	spec := must("spec")
	cases := []struct {
		name string
		p, q *prune.Plan
		want bool
	}{
		{"all covers a plan", all, node, true},
		{"a plan does not cover all", spec, all, false},
		{"a field covers itself", node, must("spec.nodeName"), true},
		{"a parent covers its fields", spec, node, true},
		{"a field does not cover its parent", node, spec, false},
		{"siblings do not cover each other", node, status, false},
		{"a union covers both", node.Union(status), status, true},
		{"metadata only is covered by any", node, must(), true},
	}
	for _, tc := range cases {
		if got := tc.p.Covers(tc.q); got != tc.want {
			t.Errorf("%s: %v covers %v = %v, want %v", tc.name, tc.p, tc.q, got, tc.want)
		}
	}
	if u := node.Union(all); !u.KeepsAll() {
		t.Errorf("union with all = %v, want all", u)
	}
	if got, want := node.Union(spec).String(), "apiVersion,kind,metadata,spec"; got != want {
		t.Errorf("union = %s, want %s", got, want)
	}
}

func TestApplyLeavesOtherValuesAlone(t *testing.T) {
	plan, err := prune.Compile(podType, nil)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24"}}
	plan.Apply(node)
	plan.Apply((*corev1.Pod)(nil))
	plan.Apply(corev1.Pod{})
	if node.Spec.PodCIDR == "" {
		t.Error("a plan of pods pruned a node")
	}
}

func BenchmarkApplyPod(b *testing.B) {
	plan, err := prune.Compile(podType, []string{"spec.nodeName", "status"})
	if err != nil {
		b.Fatal(err)
	}
	pods := make([]*corev1.Pod, b.N)
	for i := range pods {
		pods[i] = pod()
	}
	b.ResetTimer()
	for i := range b.N {
		plan.Apply(pods[i])
	}
}
