package warmset_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/internal/warmset"
)

// TestStart: a Set holds the declared informers synced with their
// declared indexes built, and nothing else; an informer declared by users
// goes when the last of them is released; with nothing declared there is
// no Set.
func TestStart(t *testing.T) {
	if w := warmset.Start(context.Background(), fake.NewClientset(), nil, informers.Options{}, nil); w != nil {
		t.Fatal("a Set of nothing")
	}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	byNode := func(obj any) ([]string, error) { return []string{obj.(*corev1.Pod).Spec.NodeName}, nil }
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"},
			Spec:       corev1.PodSpec{NodeName: "n1"},
		},
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"},
			Spec:       corev1.PodSpec{NodeName: "n2"},
		},
	)
	w := warmset.Start(
		context.Background(),
		client,
		metadatafake.NewSimpleMetadataClient(scheme),
		informers.Options{},
		[]warmset.Declared{
			{Resource: pods, Indexers: cache.Indexers{"by-node": byNode}},
			{Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
				Users: []string{"x-controller", "y-controller"}},
		},
	)
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := w.Informers().WaitForCacheSync(ctx); err != nil {
		t.Fatal(err)
	}
	inf := w.Informers().Typed().Core().V1().Pods().Informer()
	got, err := inf.GetIndexer().ByIndex("by-node", "n2")
	if err != nil || len(got) != 1 {
		t.Fatalf("by-node index: %v, %v; want pod b", got, err)
	}
	if !isClosed(w.Informers().Started()) {
		t.Error("the warm set is not started")
	}
	user := w.Informers().For("z-controller")
	cms := user.Typed().Core().V1().ConfigMaps().Informer()
	user.Shutdown() // another holder's release: the declarations still hold it
	w.Release("x-controller")
	if cms.IsStopped() {
		t.Error("a declared informer stopped while one of its users holds it")
	}
	w.Release("y-controller")
	w.Release("y-controller") // twice is harmless
	if !cms.IsStopped() {
		t.Error("a declared informer runs after its last user was released")
	}
}

// TestDeclareMerges: one entry per resource, every user in it, the first
// object type and the first indexer of each name kept, and the caller's
// indexer map never changed.
func TestDeclareMerges(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	first := func(any) ([]string, error) { return []string{"first"}, nil }
	second := func(any) ([]string, error) { return []string{"second"}, nil }
	mine := cache.Indexers{"byNode": first}

	var d []warmset.Declared
	d = warmset.Declare(d, "a", pods, nil, mine)
	d = warmset.Declare(d, "b", nodes, &corev1.Node{}, nil)
	d = warmset.Declare(d, "c", pods, &corev1.Pod{}, cache.Indexers{"byNode": second,
		"byIP": second})
	d = warmset.Declare(d, "d", pods, &corev1.Node{}, nil)

	if len(d) != 2 || d[0].Resource != pods || d[1].Resource != nodes {
		t.Fatalf("declared %v, want pods then nodes, once each", d)
	}
	p := d[0]
	if got := p.Users; len(got) != 3 || got[0] != "a" || got[1] != "c" || got[2] != "d" {
		t.Errorf("pods' users %v, want [a c d]", got)
	}
	if _, ok := p.Object.(*corev1.Pod); !ok {
		t.Errorf("pods' object type %T, want the first declared, *v1.Pod", p.Object)
	}
	if len(p.Indexers) != 2 {
		t.Errorf("pods' indexers %v, want byNode and byIP", p.Indexers)
	}
	if got, _ := p.Indexers["byNode"](nil); got[0] != "first" {
		t.Errorf("byNode is the %s declared, want the first", got[0])
	}
	if len(mine) != 1 {
		t.Error("Declare changed the caller's indexers")
	}
}
