package index

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func withVolumes(name, ns string, vols ...corev1.Volume) *corev1.Pod {
	p := pod(name, ns, nil)
	p.Spec.Volumes = vols
	return p
}

func claimVolume(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func ephemeralVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		Ephemeral: &corev1.EphemeralVolumeSource{}}}
}

func TestPodsNaming(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, PodsByClaimIndexers())
	for _, p := range []*corev1.Pod{
		withVolumes("direct", "a", claimVolume("v", "data")),
		withVolumes("web", "a", ephemeralVolume("data"), claimVolume("w", "data")),
		withVolumes("other-ns", "b", claimVolume("v", "data")),
		withVolumes("empty-dir", "a", corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{}}}),
		withVolumes("none", "a"),
	} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		ns, claim string
		want      []string
	}{
		{"a", "data", []string{"direct", "web"}},
		{"a", "web-data", []string{"web"}},
		{"b", "data", []string{"other-ns"}},
		{"a", "direct-v", nil},
		{"a", "empty-dir-data", nil},
	} {
		got, err := PodsNaming(idx, tt.ns, tt.claim)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range got {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, tt.want) {
			t.Errorf("PodsNaming(%s, %s) = %v, want %v", tt.ns, tt.claim, names, tt.want)
		}
	}
}

func TestClaimOf(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	for _, tt := range []struct {
		v    corev1.Volume
		want string
	}{
		{claimVolume("v", "data"), "data"},
		{ephemeralVolume("scratch"), "web-scratch"},
		{corev1.Volume{Name: "x"}, ""},
	} {
		if got := ClaimOf(p, &tt.v); got != tt.want {
			t.Errorf("ClaimOf(%s) = %q, want %q", tt.v.Name, got, tt.want)
		}
	}
}

func TestAddPodsByClaimIsIdempotent(t *testing.T) {
	inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Pods().Informer()
	for range 2 {
		if err := AddPodsByClaim(inf); err != nil {
			t.Fatalf("AddPodsByClaim: %v", err)
		}
	}
	if _, ok := inf.GetIndexer().GetIndexers()[PodsByClaim]; !ok {
		t.Error("the index is not there")
	}
}
