package daemonset

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/internal/podtemplate"
)

// hashTemplates are the templates whose hashes were computed once with
// KCM's own function (k8s.io/kubernetes v1.37.1 pkg/controller.ComputeHash,
// in a throwaway program using the upstream module) and hard-coded below.
func hashTemplates() []corev1.PodTemplateSpec {
	base := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{
			Containers:   []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			NodeSelector: map[string]string{"role": "agent"},
		},
	}
	rich := *base.DeepCopy()
	rich.Annotations = map[string]string{"rollout": "2"}
	rich.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	rich.Spec.Tolerations = []corev1.Toleration{
		{
			Key:      "example.com/dedicated",
			Operator: corev1.TolerationOpEqual,
			Value:    "db",
			Effect:   corev1.TaintEffectNoSchedule,
		},
	}
	rich.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}},
				},
			}},
		},
	}}
	return []corev1.PodTemplateSpec{base, rich}
}

// TestTemplateHashIsKCMs: the revision hash equals KCM's for the same
// template and collisionCount (expected values computed with KCM's
// ComputeHash, see hashTemplates).
func TestTemplateHashIsKCMs(t *testing.T) {
	want := []map[string]string{
		{"nil": "796475655d", "1": "65689cfb4c", "7": "575897fb45"},
		{"nil": "7d966bdd57", "1": "6744ff9fb", "7": "57f5c8646b"},
	}
	for i, tmpl := range hashTemplates() {
		for name, cc := range map[string]*int32{"nil": nil, "1": ptr.To[int32](1), "7": ptr.To[int32](7)} {
			if got := podtemplate.Hash(&tmpl, cc); got != want[i][name] {
				t.Errorf(
					"template %d, collisionCount %s: hash %s, want %s",
					i,
					name,
					got,
					want[i][name],
				)
			}
		}
	}
}

// TestRevisionDataIsKCMs: the bytes a revision stores are KCM's, byte
// for byte (KCM decides whether a revision is current by comparing them);
// KCM's daemon.Match accepted this exact string for hashTemplates()[1] in
// a throwaway program using the upstream module.
func TestRevisionDataIsKCMs(t *testing.T) {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns"},
		Spec:       appsv1.DaemonSetSpec{Template: hashTemplates()[1]},
	}
	const want = `{"spec":{"template":{"$patch":"replace","metadata":{"annotations":{"rollout":"2"},"labels":{"app":"agent"}},"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["x"]}]}]}}},"containers":[{"image":"registry.k8s.io/pause:3.10","name":"c","resources":{}}],"nodeSelector":{"role":"agent"},"terminationGracePeriodSeconds":30,"tolerations":[{"effect":"NoSchedule","key":"example.com/dedicated","operator":"Equal","value":"db"}]}}}}`
	got, err := podtemplate.RevisionPatch(ds)
	if err != nil || string(got) != want {
		t.Errorf("revisionData = %s, %v\nwant %s", got, err, want)
	}
}

// TestRevisions: the first sync records revision 1 named <ds>-<hash>
// (labels: the template's and the hash; annotations: the DaemonSet's); a
// template change adds revision 2; going back to the first template
// reuses revision 1, renumbered 3; beyond revisionHistoryLimit the oldest
// revisions no pod uses are deleted.
func TestRevisions(t *testing.T) {
	ds := newDS(
		"agent",
		func(ds *appsv1.DaemonSet) { ds.Spec.RevisionHistoryLimit = ptr.To[int32](1) },
	)
	f := newFixture(t, ds, newNode("a"))
	f.mustSync("agent")
	h1 := podtemplate.Hash(&ds.Spec.Template, nil)
	crs := f.revisions()
	if len(crs) != 1 || crs[0].Name != "agent-"+h1 || crs[0].Revision != 1 ||
		crs[0].Labels["app"] != "agent" || crs[0].Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != h1 ||
		crs[0].Annotations[appsv1.DeprecatedTemplateGeneration] != "1" || !metav1.IsControlledBy(&crs[0], ds) {
		t.Fatalf("first revisions %+v", crs)
	}

	f.changeTemplate("agent", "img:2")
	f.c.forgetExpectations("ns/agent")
	f.mustSync("agent")
	h2 := podtemplate.Hash(&f.ds("agent").Spec.Template, nil)
	if got := revisionNames(f.revisions()); !slices.Equal(
		got,
		[]string{"agent-" + h1 + "@1", "agent-" + h2 + "@2"},
	) {
		t.Fatalf("after a template change: %v", got)
	}

	// Back to img:1: revision 1 is current again and renumbered; the pod
	// of img:1 keeps it, so nothing is deleted although the limit is 1...
	f.changeTemplate("agent", "img:1")
	f.c.forgetExpectations("ns/agent")
	f.mustSync("agent")
	if got := revisionNames(f.revisions()); !slices.Equal(
		got,
		[]string{"agent-" + h2 + "@2", "agent-" + h1 + "@3"},
	) {
		t.Fatalf("after rolling back: %v", got)
	}
	// ... and a third template leaves two old revisions, one too many:
	// the oldest unused goes.
	for _, p := range f.apiPods() { // no pod of h2 is left
		if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == h2 {
			t.Fatalf("pod %s still of %s", p.Name, h2)
		}
	}
	f.changeTemplate("agent", "img:3")
	f.c.forgetExpectations("ns/agent")
	f.mustSync("agent")
	h3 := podtemplate.Hash(&f.ds("agent").Spec.Template, nil)
	if got := revisionNames(f.revisions()); !slices.Equal(
		got,
		[]string{"agent-" + h1 + "@3", "agent-" + h3 + "@4"},
	) {
		t.Fatalf("after a third template with limit 1: %v", got)
	}
}

func revisionNames(crs []appsv1.ControllerRevision) []string {
	var out []string
	for _, cr := range crs {
		out = append(out, fmt.Sprintf("%s@%d", cr.Name, cr.Revision))
	}
	return out
}

// TestCollisionCount: a revision of the current name that records another
// template is a hash collision: collisionCount goes to 1, the sync fails,
// and the next sync names the revision with the new hash.
func TestCollisionCount(t *testing.T) {
	ds := newDS("agent")
	h := podtemplate.Hash(&ds.Spec.Template, nil)
	squatter := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns",
			Name:      "agent-" + h,
			Labels:    map[string]string{"app": "other"},
		},
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)},
	}
	f := newFixture(t, ds, newNode("a"), squatter)
	if err := f.sync("agent"); err == nil {
		t.Fatal("sync succeeded despite the collision")
	}
	cc := f.ds("agent").Status.CollisionCount
	if cc == nil || *cc != 1 {
		t.Fatalf("collisionCount %v, want 1", cc)
	}
	f.mustSync("agent")
	want := "agent-" + podtemplate.Hash(&ds.Spec.Template, ptr.To[int32](1))
	if !slices.Contains(revisionNames(f.revisions()), want+"@1") {
		t.Errorf("revisions %v, want %s@1", revisionNames(f.revisions()), want)
	}
	for _, p := range f.apiPods() {
		if "agent-"+p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != want {
			t.Errorf("pod %s labelled %v", p.Name, p.Labels)
		}
	}
}

// TestDuplicateCurrentRevisions: two revisions recording the current
// template collapse into the newer; pods labelled with the other's hash
// are relabelled.
func TestDuplicateCurrentRevisions(t *testing.T) {
	ds := newDS("agent")
	data, err := podtemplate.RevisionPatch(ds)
	if err != nil {
		t.Fatal(err)
	}
	rev := func(name string, n int64) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "ns",
				Name:      name,
				UID:       types.UID("uid-" + name),
				Labels: map[string]string{
					"app":                                 "agent",
					appsv1.DefaultDaemonSetUniqueLabelKey: name,
				},
				OwnerReferences: []metav1.OwnerReference{
					*metav1.NewControllerRef(ds, controllerKind),
				},
			},
			Data: runtime.RawExtension{Raw: data}, Revision: n,
		}
	}
	old := daemonPod("p", ds, "a", "dup-1", epoch)
	f := newFixture(t, ds, newNode("a"), rev("dup-1", 1), rev("dup-2", 2), old)
	f.mustSync("agent")
	if got := revisionNames(f.revisions()); !slices.Equal(got, []string{"dup-2@2"}) {
		t.Errorf("revisions %v, want [dup-2@2]", got)
	}
	relabelled := false
	for _, a := range f.client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && p.GetName() == "p" &&
			string(p.GetPatch()) == `{"metadata":{"labels":{"controller-revision-hash":"dup-2"}}}` {
			relabelled = true
		}
	}
	if !relabelled {
		t.Error("the pod of the dropped duplicate was not relabelled with the kept revision's hash")
	}
}
