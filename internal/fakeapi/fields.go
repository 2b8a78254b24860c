package fakeapi

import (
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
)

// fieldManagers track field ownership (metadata.managedFields) with the
// API server's own field manager (k8s.io/apimachinery's managedfields):
// a server-side apply merges by the fields each manager owns. An object
// is tracked from its first apply on: before it, writes record no
// manager, and the apply finds the fields already set owned by
// "before-first-apply", as the API server does for an object written
// before field management (so an apply that changes them conflicts). This
// spares the cost of tracking to the objects nobody applies. A built-in
// resource is read with its schema from client-go; a custom resource as
// the API server reads one without a schema (maps merged key by key,
// lists whole). Used with Server.mu held.
type fieldManagers struct {
	byKind map[fieldManagerKey]*managedfields.FieldManager
}

type fieldManagerKey struct {
	gvk schema.GroupVersionKind
	sub string
}

// builtInTypes reads built-in objects by client-go's schemas; made once,
// as parsing them takes a while.
var builtInTypes = sync.OnceValue(func() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(scheme.Scheme)
})

func (f *fieldManagers) get(r Resource, sub string) (*managedfields.FieldManager, error) {
	k := fieldManagerKey{gvk: r.GVK(), sub: sub}
	if m := f.byKind[k]; m != nil {
		return m, nil
	}
	types := managedfields.NewDeducedTypeConverter()
	if r.BuiltIn && scheme.Scheme.Recognizes(k.gvk) {
		types = builtInTypes()
	}
	m, err := managedfields.NewDefaultFieldManager(types, sameVersion{}, noDefaults{},
		unstructuredKinds{}, k.gvk, k.gvk.GroupVersion(), sub, nil)
	if err != nil {
		return nil, err
	}
	if f.byKind == nil {
		f.byKind = map[fieldManagerKey]*managedfields.FieldManager{}
	}
	f.byKind[k] = m
	return m, nil
}

// withKind is obj as an Unstructured of r's kind.
func withKind(r Resource, obj map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(r.GVK())
	return u
}

// update records a write other than an apply, of next over cur (nil for
// a create), by manager: once an apply made cur tracked, the fields it set
// or changed become manager's. The managed fields of an object the field
// manager cannot read stay as they were, as on the API server.
func (f *fieldManagers) update(r Resource, sub string, cur, next map[string]any,
	manager string) map[string]any {
	if cur == nil || metaOf(cur)["managedFields"] == nil {
		return next
	}
	m, err := f.get(r, sub)
	if err != nil {
		return next
	}
	out := m.UpdateNoErrors(withKind(r, deepCopy(cur)), withKind(r, next), manager)
	if u, ok := out.(*unstructured.Unstructured); ok {
		return u.Object
	}
	return next
}

// apply merges applied into live as manager's server-side apply: 409
// Conflict when it would change a field another manager owns, unless
// force; fields manager applied before and leaves out now are removed
// (unless another manager owns them).
func (f *fieldManagers) apply(r Resource, sub string, live, applied map[string]any,
	manager string, force bool) (map[string]any, error) {
	m, err := f.get(r, sub)
	if err != nil {
		return nil, err
	}
	out, err := m.Apply(withKind(r, deepCopy(live)), &unstructured.Unstructured{Object: applied},
		manager, force)
	if err != nil {
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			return nil, err
		}
		return nil, apierrors.NewInternalError(err)
	}
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("fakeapi: the field manager returned a %T", out)
	}
	return normalize(u.Object)
}

// sameVersion converts nothing: the server serves one version of each
// kind.
type sameVersion struct{}

func (sameVersion) Convert(_, _, _ any) error {
	return errors.New("fakeapi: objects are not converted")
}

func (sameVersion) ConvertToVersion(
	in runtime.Object,
	gv runtime.GroupVersioner,
) (runtime.Object, error) {
	gvk := in.GetObjectKind().GroupVersionKind()
	if target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk}); ok &&
		target == gvk {
		return in, nil
	}
	return nil, fmt.Errorf("fakeapi: %v is served in one version only", gvk)
}

func (sameVersion) ConvertFieldLabel(
	_ schema.GroupVersionKind,
	label, value string,
) (string, string, error) {
	return label, value, nil
}

// noDefaults defaults nothing: the server does no defaulting.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

// unstructuredKinds makes empty objects of any kind, as Unstructured.
type unstructuredKinds struct{}

func (unstructuredKinds) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
