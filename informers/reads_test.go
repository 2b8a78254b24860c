package informers_test

import (
	"context"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlhost/ctrlhost/informers"
)

func fullPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{NodeName: "node-1", RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// cachedPod starts v's pod informer if it has not, waits for it to sync and
// returns ns/name from it.
func cachedPod(t *testing.T, v *informers.Set, name string) *corev1.Pod {
	t.Helper()
	v.Typed().Core().V1().Pods().Informer()
	v.Start(nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := v.WaitForCacheSync(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := v.Typed().Core().V1().Pods().Lister().Pods("ns").Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestInformerKeepsWhatItsHoldersRead: holders that declared reads share
// one informer that keeps the union of what they read, composed before it
// starts; a holder that comes once it runs and reads more gets an informer
// of its own; one that did not declare pods reads them whole.
func TestInformerKeepsWhatItsHoldersRead(t *testing.T) {
	opts := informers.Options{Reads: map[string]informers.Fields{
		"nodes":  {podsGVR: {"spec.nodeName"}},
		"phases": {podsGVR: {"status.phase"}},
		"images": {podsGVR: {"spec.containers.image"}},
		"meta":   {podsGVR: nil},
	}}
	f := newFixture(t, opts, []runtime.Object{fullPod("p")}, nil)
	nodes, phases := f.set.For("nodes"), f.set.For("phases")
	nodes.Typed().Core().V1().Pods().Informer()
	phases.Typed().Core().V1().Pods().Informer()
	start(t, f.set)

	got := cachedPod(t, nodes, "p")
	want := fullPod("p")
	want.Spec = corev1.PodSpec{NodeName: "node-1"}
	want.Status = corev1.PodStatus{Phase: corev1.PodRunning}
	if got.Spec.NodeName != want.Spec.NodeName || got.Status.Phase != want.Status.Phase ||
		len(got.Spec.Containers) != 0 || got.Spec.RestartPolicy != "" ||
		got.Labels["app"] != "x" {
		t.Errorf("shared informer keeps %+v, want nodeName, phase and metadata only", got)
	}
	if n := f.set.Informers(); n != 1 {
		t.Errorf("%d informers for two holders declared before start, want 1", n)
	}

	// Covered by what runs: no new informer.
	meta := f.set.For("meta")
	meta.Typed().Core().V1().Pods().Informer()
	if n := f.set.Informers(); n != 1 {
		t.Errorf("%d informers after a holder reading metadata only, want 1", n)
	}

	// Reads more than what runs keeps: an informer of its own.
	images := f.set.For("images")
	images.Typed().Core().V1().Pods().Informer()
	if n := f.set.Informers(); n != 2 {
		t.Errorf("%d informers, want 2 (the shared one, images')", n)
	}
	if p := cachedPod(t, images, "p"); len(p.Spec.Containers) != 1 ||
		p.Spec.Containers[0].Image != "nginx" || p.Spec.Containers[0].Name != "" {
		t.Errorf("images' informer keeps containers %+v, want the image only", p.Spec.Containers)
	}
	undeclared := f.set.For("undeclared")
	undeclared.Typed().Core().V1().Pods().Informer()
	if n := f.set.Informers(); n != 3 {
		t.Errorf("%d informers, want 3 (the shared one, images', the whole one)", n)
	}
	if p := cachedPod(t, undeclared, "p"); p.Spec.RestartPolicy != corev1.RestartPolicyAlways ||
		len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Name != "c" {
		t.Errorf("an undeclared holder reads %+v, want the whole pod", p)
	}

	undeclared.Shutdown()
	images.Shutdown()
	if n := f.set.Informers(); n != 1 {
		t.Errorf("%d informers after the wider holders let go, want 1", n)
	}
	// The Set itself declares nothing: it reads pods whole.
	if p := cachedPod(t, f.set, "p"); p.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("the Set reads %+v, want the whole pod", p)
	}
}

func TestUndeclaredHolderWidensAnInformerNotStarted(t *testing.T) {
	opts := informers.Options{
		Reads: map[string]informers.Fields{"nodes": {podsGVR: {"spec.nodeName"}}},
	}
	f := newFixture(t, opts, []runtime.Object{fullPod("p")}, nil)
	nodes := f.set.For("nodes")
	nodes.Typed().Core().V1().Pods().Informer()
	f.set.For("whole").Typed().Core().V1().Pods().Informer()
	start(t, f.set)
	if p := cachedPod(t, nodes, "p"); p.Spec.Containers[0].Image != "nginx" {
		t.Errorf("informer keeps %+v, want the whole pod (a holder did not declare)", p.Spec)
	}
	if n := f.set.Informers(); n != 1 {
		t.Errorf("%d informers, want 1", n)
	}
}

func TestInternStringsSharesRepeatedStrings(t *testing.T) {
	a, b := fullPod("a"), fullPod("b")
	f := newFixture(t, informers.Options{InternStrings: true}, []runtime.Object{a, b}, nil)
	f.set.Typed().Core().V1().Pods().Informer()
	start(t, f.set)
	pa, pb := cachedPod(t, f.set, "a"), cachedPod(t, f.set, "b")
	if unsafe.StringData(pa.Spec.NodeName) != unsafe.StringData(pb.Spec.NodeName) {
		t.Error("two cached pods hold copies of their own of one node name")
	}
	if pa.Spec.Containers[0].Image != "nginx" {
		t.Errorf("interned image = %q", pa.Spec.Containers[0].Image)
	}
}

func TestCheckFields(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	cases := []struct {
		name   string
		fields informers.Fields
		want   string
	}{
		{"valid", informers.Fields{podsGVR: {"spec.nodeName", "status"}}, ""},
		{"metadata only", informers.Fields{podsGVR: nil}, ""},
		{"no such field", informers.Fields{podsGVR: {"spec.node"}},
			`/v1, Resource=pods: field path "spec.node" of Pod: PodSpec has no field "node"`},
		{"no typed informer", informers.Fields{widgets: {"spec"}},
			"example.com/v1, Resource=widgets has no typed informer"},
	}
	for _, tc := range cases {
		err := informers.CheckFields(tc.fields)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil ||
			!strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: CheckFields = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestFieldsPrune(t *testing.T) {
	p := fullPod("p")
	if err := (informers.Fields{podsGVR: {"spec.nodeName"}}).Prune(p); err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "node-1" || len(p.Spec.Containers) != 0 || p.Status.Phase != "" ||
		p.Labels["app"] != "x" {
		t.Errorf("pruned pod = %+v, want metadata and nodeName", p)
	}
	node := &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24"}}
	if err := (informers.Fields{podsGVR: nil}).Prune(node); err != nil || node.Spec.PodCIDR == "" {
		t.Errorf("Prune of a resource not named: %v, %+v", err, node.Spec)
	}
	if err := (informers.Fields{podsGVR: {"spec.nope"}}).Prune(fullPod("p")); err == nil {
		t.Error("Prune with a bad path: no error")
	}
}

func TestAnyResourceReadsMetadataOfWhatIsNotNamed(t *testing.T) {
	opts := informers.Options{Reads: map[string]informers.Fields{
		"gc": {informers.AnyResource: nil},
	}}
	f := newFixture(t, opts, []runtime.Object{fullPod("p")}, nil)
	gc := f.set.For("gc")
	gi, err := gc.ObjectOrMetadata().ForResource(podsGVR)
	if err != nil {
		t.Fatal(err)
	}
	gi.Informer()
	start(t, f.set)
	p := cachedPod(t, gc, "p")
	if p.Labels["app"] != "x" || p.Spec.NodeName != "" || p.Status.Phase != "" {
		t.Errorf("a metadata-only reader's informer keeps %+v, want metadata only", p)
	}

	fields := informers.Fields{informers.AnyResource: nil,
		corev1.SchemeGroupVersion.WithResource("nodes"): {"spec.podCIDR"}}
	pod, node := fullPod("p"), &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24",
		ProviderID: "x"}}
	if err := fields.Prune(pod); err != nil {
		t.Fatal(err)
	}
	if err := fields.Prune(node); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" || node.Spec.PodCIDR == "" || node.Spec.ProviderID != "" {
		t.Errorf("Prune with AnyResource: pod %+v, node %+v", pod.Spec, node.Spec)
	}
	err = informers.CheckFields(informers.Fields{informers.AnyResource: {"spec"}})
	if err == nil || !strings.Contains(err.Error(), "only metadata can be declared for every") {
		t.Errorf("CheckFields of AnyResource with a path = %v", err)
	}
}

// TestAnticipatedReadersWidenAnInformerBeforeItStarts: a warm set's
// informer covers the controllers that will hold it only once the term
// runs, so that they need no informer of their own: what they declared
// they read, or the whole object for one that did not say (unless it
// declared its informers, none of that type).
func TestAnticipatedReadersWidenAnInformerBeforeItStarts(t *testing.T) {
	nodesGVR := corev1.SchemeGroupVersion.WithResource("nodes")
	reads := map[string]informers.Fields{
		"nodes":  {podsGVR: {"spec.nodeName"}},
		"phases": {podsGVR: {"status.phase"}},
		"other":  {nodesGVR: nil},
	}
	for _, tc := range []struct {
		name       string
		anticipate []string
		informers  map[string][]schema.GroupVersionResource
		whole      bool
	}{
		{"declared readers", []string{"phases", "other"},
			map[string][]schema.GroupVersionResource{"other": {nodesGVR}}, false},
		{"a reader that declared nothing", []string{"phases", "undeclared"}, nil, true},
		{"a reader that did not say what informers it takes", []string{"phases", "other"}, nil, true},
		{"a reader that declared informers of other resources", []string{"phases", "undeclared"},
			map[string][]schema.GroupVersionResource{"undeclared": {nodesGVR}}, false},
		{"a reader that declared the pods informer without its fields", []string{"phases", "undeclared"},
			map[string][]schema.GroupVersionResource{"undeclared": {podsGVR}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := informers.Options{
				Reads:      reads,
				Anticipate: tc.anticipate,
				Informers:  tc.informers,
			}
			f := newFixture(t, opts, []runtime.Object{fullPod("p")}, nil)
			nodes := f.set.For("nodes")
			nodes.Typed().Core().V1().Pods().Informer()
			start(t, f.set)
			p := cachedPod(t, nodes, "p")
			switch {
			case p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != "node-1":
				t.Errorf("informer keeps %+v, want nodeName and the anticipated phase", p)
			case tc.whole && len(p.Spec.Containers) == 0:
				t.Errorf("informer keeps %+v, want whole pods", p)
			case !tc.whole && len(p.Spec.Containers) != 0:
				t.Errorf("informer keeps %+v, want nodeName and the anticipated phase only", p)
			}
			for _, user := range tc.anticipate {
				if tc.whole || user == "phases" { // the others said they take no pods
					f.set.For(user).Typed().Core().V1().Pods().Informer()
				}
			}
			if n := f.set.Informers(); n != 1 {
				t.Errorf("%d informers once the anticipated readers came, want 1", n)
			}
		})
	}
}
