package informers_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/informers"
)

func podsByNode(obj any) ([]string, error) { return []string{obj.(*corev1.Pod).Spec.NodeName}, nil }

// Holders of one informer share an index they add under one name with
// one function: a holder that comes back, or a second holder, adding it
// again is not refused (client-go refuses any second index of a name); an
// index of that name with another function is refused, naming the index,
// and adds nothing. The index outlives the holder that added it while the
// informer runs.
func TestHoldersShareAnIndex(t *testing.T) {
	f := newFixture(t, informers.Options{}, []runtime.Object{fullPod("p")}, nil)
	first := f.set.For("a")
	if err := first.Typed().Core().V1().Pods().Informer().AddIndexers(
		cache.Indexers{"by-node": podsByNode}); err != nil {
		t.Fatal(err)
	}
	second := f.set.For("b")
	inf := second.Typed().Core().V1().Pods().Informer()
	start(t, f.set)
	cachedPod(t, second, "p")
	first.Shutdown()
	again := f.set.For("a")
	for _, v := range []*informers.Set{second, again} {
		i := v.Typed().Core().V1().Pods().Informer()
		if err := i.GetIndexer().AddIndexers(cache.Indexers{"by-node": podsByNode}); err != nil {
			t.Errorf("the same index added again: %v", err)
		}
	}
	other := func(obj any) ([]string, error) { return []string{obj.(*corev1.Pod).Name}, nil }
	err := again.Typed().Core().V1().Pods().Informer().AddIndexers(
		cache.Indexers{"by-node": other, "by-name": other})
	if err == nil ||
		!strings.Contains(err.Error(), `index "by-node" is there already, with another function`) {
		t.Errorf("another function under the name: %v, want a refusal naming the index", err)
	}
	if _, ok := inf.GetIndexer().GetIndexers()["by-name"]; ok {
		t.Error("a refused AddIndexers added some of its indexes")
	}
	pods, err := inf.GetIndexer().ByIndex("by-node", "node-1")
	if err != nil || len(pods) != 1 {
		t.Errorf("the shared index holds %d pods (%v), want 1", len(pods), err)
	}
}
