package informers

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// Declared returns the informer of gvr that a descriptor's declaration
// names (descriptor.WithInformers, with the Go type of WithObjectType when
// object is not nil): with an object, the custom informer of its type, as
// Custom makes it; else the typed one where client-go has it, the dynamic
// one when the Set has a dynamic client, the metadata one otherwise. It is
// how a host keeps declared informers warm ahead of a term.
func (s *Set) Declared(gvr schema.GroupVersionResource,
	object runtime.Object) (cache.SharedIndexInformer, error) {
	if object != nil {
		return s.customFor(gvr, func() runtime.Object { return object.DeepCopyObject() })
	}
	if inf, err := s.Typed().ForResource(gvr); err == nil {
		return inf.Informer(), nil
	}
	if dyn := s.Dynamic(); dyn != nil {
		return dyn.ForResource(gvr).Informer(), nil
	}
	return s.Metadata().ForResource(gvr).Informer(), nil
}
