package statefulset

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// kcmSet is the StatefulSet of the differential scenario as the API
// server defaulted it; KCM v1.37.1 named its revision web-6b7ccbcc74.
func kcmSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"},
		Spec: appsv1.StatefulSetSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "c", Image: "registry.k8s.io/pause:3.10",
						ImagePullPolicy:          corev1.PullIfNotPresent,
						TerminationMessagePath:   "/dev/termination-log",
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					}},
					DNSPolicy:                     corev1.DNSClusterFirst,
					RestartPolicy:                 corev1.RestartPolicyAlways,
					SchedulerName:                 "default-scheduler",
					SecurityContext:               &corev1.PodSecurityContext{},
					TerminationGracePeriodSeconds: ptr.To[int64](30),
				},
			},
		},
	}
}

func TestRevisionMatchesKCM(t *testing.T) {
	r, err := newRevision(kcmSet(), 1, ptr.To[int32](0))
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "web-6b7ccbcc74" || r.Labels[hashLabel] != "6b7ccbcc74" ||
		r.Labels["app"] != "web" {
		t.Errorf("revision %s labels %v, want KCM's web-6b7ccbcc74", r.Name, r.Labels)
	}
	if !strings.HasPrefix(string(r.Data.Raw), `{"spec":{"template":{"$patch":"replace",`) {
		t.Errorf("data %s", r.Data.Raw)
	}
	if ref := metav1.GetControllerOf(r); ref == nil || ref.Name != "web" || ref.UID != "uid-web" {
		t.Errorf("controller %+v", ref)
	}
	// The collision count is part of the hash.
	other, err := newRevision(kcmSet(), 1, ptr.To[int32](1))
	if err != nil {
		t.Fatal(err)
	}
	if other.Name == r.Name {
		t.Error("collisionCount 1 gave the same name")
	}
	// A revision restores its template.
	changed := kcmSet()
	changed.Spec.Template.Labels["v"] = "2"
	restored, err := applyRevision(changed, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := restored.Spec.Template.Labels["v"]; ok {
		t.Errorf("restored labels %v", restored.Spec.Template.Labels)
	}
}

// TestHashCollision: a namesake revision with other data raises the
// collision count, recorded in status, and the revision takes the next
// name.
func TestHashCollision(t *testing.T) {
	set := newSet("web", 1)
	want, err := newRevision(set, 1, ptr.To[int32](0))
	if err != nil {
		t.Fatal(err)
	}
	squatter := want.DeepCopy()
	squatter.Data.Raw = []byte(`{"other":true}`)
	squatter.Labels = map[string]string{"unrelated": "x"} // not selected by the set
	squatter.OwnerReferences = nil
	f := newFixture(t, []runtime.Object{set, squatter})
	f.mustSync("web")
	st := f.set("web").Status
	if ptr.Deref(st.CollisionCount, 0) != 1 || st.UpdateRevision == want.Name {
		t.Errorf("status %+v", st)
	}
}

// TestSemanticRevision: under the gate, a newest revision whose bytes
// differ but that restores the same template is kept, not replaced.
func TestSemanticRevision(t *testing.T) {
	set := newSet("web", 1)
	rev, err := newRevision(set, 1, ptr.To[int32](0))
	if err != nil {
		t.Fatal(err)
	}
	// Same template, keys in struct order: other bytes, same content.
	tmpl, err := json.Marshal(set.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	raw := `{"spec":{"template":` + string(tmpl[:len(tmpl)-1]) + `,"$patch":"replace"}}}`
	if raw == string(rev.Data.Raw) {
		t.Fatal("the bytes are the same")
	}
	rev.Data.Raw = []byte(raw)
	for _, gate := range []bool{true, false} {
		f := newFixture(t, []runtime.Object{set, rev}, func(c *config) {
			c.semanticRevisions = gate
		})
		f.mustSync("web")
		creates := 0
		for _, a := range f.client.Actions() {
			if a.Matches("create", "controllerrevisions") {
				creates++
			}
		}
		// Off, the new revision takes the same name, collides, and is
		// created under the next one.
		if want := map[bool]int{true: 0, false: 2}[gate]; creates != want {
			t.Errorf("gate %v: %d revisions created, want %d", gate, creates, want)
		}
	}
}
