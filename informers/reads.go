package informers

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/informers/internal/intern"
	"github.com/ctrlhost/ctrlhost/informers/internal/prune"
)

// Fields says which fields of each typed resource's objects one user of a
// Set reads, as JSON field paths ("spec.nodeName", "status",
// "spec.containers.resources"); no path means metadata only. A resource
// missing from it is read whole. Metadata, apiVersion and kind are always
// kept.
type Fields map[schema.GroupVersionResource][]string

// CheckFields reports whether every resource of f has a typed informer and
// every path names a field of its objects; the error names the resource,
// the path and the fields there are.
func CheckFields(f Fields) error {
	var errs []error
	for _, gvr := range slices.SortedFunc(maps.Keys(f), func(a, b schema.GroupVersionResource) int {
		return strings.Compare(a.String(), b.String())
	}) {
		r, ok := typedResources()[gvr]
		if !ok {
			errs = append(errs, fmt.Errorf("%v has no typed informer: declare reads of "+
				"client-go's typed resources only", gvr))
			continue
		}
		if _, err := prune.Compile(r.typ, f[gvr]); err != nil {
			errs = append(errs, fmt.Errorf("%v: %w", gvr, err))
		}
	}
	return errors.Join(errs...)
}

// plans are the compiled Fields of the users of a Set, by user and Go type.
type plans map[string]map[reflect.Type]*prune.Plan

// compilePlans compiles reads; what does not compile (CheckFields says
// why) is read whole.
func compilePlans(reads map[string]Fields) plans {
	out := plans{}
	for user, f := range reads {
		for gvr, paths := range f {
			r, ok := typedResources()[gvr]
			if !ok {
				continue
			}
			p, err := prune.Compile(r.typ, paths)
			if err != nil {
				continue
			}
			if out[user] == nil {
				out[user] = map[reflect.Type]*prune.Plan{}
			}
			out[user][r.typ] = p
		}
	}
	return out
}

// planFor is what holder reads of objects of typ (a pointer type):
// everything unless its user declared less.
func (p plans) planFor(holder string, typ reflect.Type) *prune.Plan {
	user, _, _ := strings.Cut(holder, "#")
	if plan := p[user][typ.Elem()]; plan != nil && holder != "" {
		return plan
	}
	return prune.All(typ.Elem())
}

// transform is the transform of e's informer: it strips managedFields
// (unless kept), drops what no holder of e reads (typed informers), and
// interns the strings that are left (when asked). e.plan is read without
// a lock: it changes only before e runs, and the transform runs only
// while e does.
func (c *core) transform(e *entry) cache.TransformFunc {
	strip := c.strip && e.kind != customKind
	internStrings := c.intern && (e.kind == typedKind || e.kind == metadataKind)
	return func(obj any) (any, error) {
		if _, tomb := obj.(cache.DeletedFinalStateUnknown); tomb {
			return obj, nil
		}
		if strip {
			if _, err := StripManagedFields(obj); err != nil {
				return nil, err
			}
		}
		if e.plan != nil {
			e.plan.Apply(obj)
		}
		if internStrings {
			intern.Apply(obj)
		}
		return obj, nil
	}
}

// Prune drops from obj (a typed object) what an informer whose holders all
// declared f drops: for the fixtures of unit tests, so that a controller
// that reads a field it did not declare fails its tests instead of
// reading a zero value in production. An object of a resource f does not
// name is left whole. The error is CheckFields'.
func (f Fields) Prune(obj runtime.Object) error {
	if err := CheckFields(f); err != nil {
		return err
	}
	typ := reflect.TypeOf(obj)
	if typ == nil || typ.Kind() != reflect.Pointer {
		return nil
	}
	for gvr, paths := range f {
		if typedResources()[gvr].typ != typ.Elem() {
			continue
		}
		p, err := prune.Compile(typ.Elem(), paths)
		if err != nil {
			return err
		}
		p.Apply(obj)
	}
	return nil
}
