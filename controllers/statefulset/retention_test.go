package statefulset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const (
	retain = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	del    = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
)

func withPolicy(scaled, deleted appsv1.PersistentVolumeClaimRetentionPolicyType) func(
	*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) {
		s.Spec.PersistentVolumeClaimRetentionPolicy =
			&appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenScaled: scaled, WhenDeleted: deleted}
	}
}

// owners names a claim's owner references as "<Kind>/<name>".
func owners(c *corev1.PersistentVolumeClaim) []string {
	var out []string
	for _, r := range c.OwnerReferences {
		out = append(out, r.Kind+"/"+r.Name)
	}
	return out
}

// TestClaimOwners: the owner references each policy wants, in range and
// scaled down, and what is left alone.
func TestClaimOwners(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			UID: types.UID("uid-pod-" + name)}}
	}
	foreign := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x",
		UID: "uid-x", Controller: ptr.To(true)}
	tests := []struct {
		name      string
		scaled    appsv1.PersistentVolumeClaimRetentionPolicyType
		deleted   appsv1.PersistentVolumeClaimRetentionPolicyType
		pod       string
		refs      []metav1.OwnerReference
		want      []string
		upToDate0 bool
	}{
		{"retain retain", retain, retain, "web-0", nil, nil, true},
		{"retain delete", retain, del, "web-0", nil, []string{"StatefulSet/web"}, false},
		{"delete retain in range", del, retain, "web-0", nil, nil, true},
		{"delete retain scaled down", del, retain, "web-5", nil, []string{"Pod/web-5"}, false},
		{"delete delete in range", del, del, "web-0", nil, []string{"StatefulSet/web"}, false},
		{"delete delete scaled down", del, del, "web-5", nil, []string{"Pod/web-5"}, false},
		{"another controller", del, del, "web-0", []metav1.OwnerReference{foreign},
			[]string{"ConfigMap/x"}, true},
		{"stale set reference", del, del, "web-0", []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "old"}},
			[]string{"StatefulSet/web"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := newSet("web", 3, withPolicy(tt.scaled, tt.deleted))
			p := pod(tt.pod)
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
				Namespace: "ns", Name: "data-" + tt.pod, OwnerReferences: tt.refs}}
			if got := claimOwnersUpToDate(claim, set, p); got != tt.upToDate0 {
				t.Errorf("up to date %v, want %v", got, tt.upToDate0)
			}
			if !tt.upToDate0 {
				setClaimOwners(claim, set, p)
			}
			if got := owners(claim); !equalStrings(got, tt.want) {
				t.Errorf("owners %v, want %v", got, tt.want)
			}
			if !claimOwnersUpToDate(claim, set, p) {
				t.Error("not up to date after setClaimOwners")
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRetentionOnScaleDown: under Delete/Delete the kept claims are the
// set's, and the condemned pod's claim becomes the pod's before the pod is
// deleted; under Retain/Retain claims have no owners.
func TestRetentionOnScaleDown(t *testing.T) {
	f := newFixture(t, []runtime.Object{newSet("web", 2, withPolicy(del, del))})
	f.settle("web", 10)
	for _, c := range f.claims() {
		if got := owners(&c); !equalStrings(got, []string{"StatefulSet/web"}) {
			t.Errorf("%s: owners %v", c.Name, got)
		}
	}
	s := f.set("web")
	s.Spec.Replicas = ptr.To[int32](1)
	f.update(s)
	f.mustSync("web")
	claims := f.claims()
	if got := owners(&claims[1]); !equalStrings(got, []string{"Pod/web-1"}) {
		t.Errorf("data-web-1: owners %v, want the pod", got)
	}
	if got := f.podNames(); got != "web-0" {
		t.Errorf("pods %q", got)
	}
	// Back to Retain: the references go.
	s = f.set("web")
	s.Spec.PersistentVolumeClaimRetentionPolicy = nil
	f.update(s)
	f.settle("web", 5)
	if got := owners(&f.claims()[0]); len(got) != 0 {
		t.Errorf("data-web-0: owners %v after Retain", got)
	}
}

// TestStaleClaimHoldsPod: under WhenScaled=Delete a claim still owned by
// a former pod of the same name keeps the pod from being created.
func TestStaleClaimHoldsPod(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns",
		Name: "data-web-0", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1",
			Kind: "Pod", Name: "web-0", UID: "former", Controller: ptr.To(true)}}}}
	f := newFixture(t, []runtime.Object{newSet("web", 1, withPolicy(del, retain)), claim})
	f.mustSync("web")
	if got := f.podNames(); got != "" {
		t.Errorf("pods %q, want none while the claim is stale", got)
	}
}
