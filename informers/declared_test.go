package informers_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/informers"
)

// Declared hands out the informer a declaration names: the custom one of
// the declared object type, the typed one where client-go has it, the
// dynamic one for other resources when the Set has a dynamic client, the
// metadata one without.
func TestDeclaredIsTheInformerADeclarationNames(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{widgets: "WidgetList"})
	withDynamic := informers.New(fake.NewClientset(), nil, informers.Options{Dynamic: dyn})
	without := informers.New(fake.NewClientset(), nil, informers.Options{})
	defer withDynamic.Shutdown()
	defer without.Shutdown()

	for _, tc := range []struct {
		name   string
		set    *informers.Set
		gvr    schema.GroupVersionResource
		object runtime.Object
		want   func(*informers.Set) cache.SharedIndexInformer
	}{{
		name: "typed", set: without, gvr: podsGVR,
		want: func(s *informers.Set) cache.SharedIndexInformer {
			return s.Typed().Core().V1().Pods().Informer()
		},
	}, {
		name: "custom", set: withDynamic, gvr: widgets, object: &Widget{},
		want: func(s *informers.Set) cache.SharedIndexInformer {
			inf, err := informers.Custom[Widget](s, widgets)
			if err != nil {
				t.Fatal(err)
			}
			return inf
		},
	}, {
		name: "dynamic", set: withDynamic, gvr: widgets,
		want: func(s *informers.Set) cache.SharedIndexInformer {
			return s.Dynamic().ForResource(widgets).Informer()
		},
	}, {
		name: "metadata", set: without, gvr: widgets,
		want: func(s *informers.Set) cache.SharedIndexInformer {
			return s.Metadata().ForResource(widgets).Informer()
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.set.Declared(tc.gvr, tc.object)
			if err != nil {
				t.Fatal(err)
			}
			// client-go hands out a typed wrapper per call: one informer
			// is one cache.
			if want := tc.want(tc.set); got.GetIndexer() != want.GetIndexer() {
				t.Errorf("Declared(%v, %T) is not the %s informer", tc.gvr, tc.object, tc.name)
			}
		})
	}
	if _, err := without.Declared(widgets, &Widget{}); err == nil {
		t.Error("Declared of an object type on a Set without a dynamic client: no error")
	}
}

// Widget is a custom resource's Go type.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Size int `json:"size"`
	} `json:"spec"`
}

func (w *Widget) DeepCopyObject() runtime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}
