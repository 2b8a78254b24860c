package informers

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestTypedResourcesMatchClientGo: every resource the Set's typed
// ForResource knows, client-go's factory knows too, with an informer of
// the same object type; and the well-known ones are there. The table is
// read from client-go's accessors by reflection, so this is what keeps it
// honest across client-go versions.
func TestTypedResourcesMatchClientGo(t *testing.T) {
	table := typedResources()
	// client-go v0.37's generated ForResource has 147 entries.
	if len(table) < 147 {
		t.Errorf("typedResources has %d resources, want at least client-go v0.37's 147", len(table))
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "pods"},
		{Version: "v1", Resource: "endpoints"},
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"},
		{Group: "flowcontrol.apiserver.k8s.io", Version: "v1",
			Resource: "prioritylevelconfigurations"},
		{Group: "internal.apiserver.k8s.io", Version: "v1alpha1", Resource: "storageversions"},
	} {
		if _, ok := table[gvr]; !ok {
			t.Errorf("typedResources lacks %v", gvr)
		}
	}
	real := kinformers.NewSharedInformerFactory(fake.NewClientset(), 0)
	for gvr, path := range table {
		gi, err := real.ForResource(gvr)
		if err != nil {
			t.Errorf("%v (%v): client-go's factory: %v", gvr, path, err)
			continue
		}
		var seen runtime.Object
		probe := &typedFactory{probe: func(obj runtime.Object) { seen = obj }}
		if _, err := probe.ForResource(gvr); err != nil || seen == nil {
			t.Errorf("%v: the probe saw no object", gvr)
			continue
		}
		if path.typ != reflect.TypeOf(seen).Elem() {
			t.Errorf("%v: typedResources says %v, the informer holds %T", gvr, path.typ, seen)
		}
		// client-go's InformerFor returns the informer it has for the
		// object's type: the one ForResource made, if the types agree.
		notThere := func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
			t.Errorf("%v: client-go's informer is not of type %T", gvr, seen)
			return nil
		}
		got := real.InformerFor(seen, notThere)
		if got != nil && got.GetIndexer() != gi.Informer().GetIndexer() {
			t.Errorf("%v: a different informer for %T", gvr, seen)
		}
	}
}
