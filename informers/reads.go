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
// missing from it is read whole, unless Fields has AnyResource. Metadata,
// apiVersion and kind are always kept.
type Fields map[schema.GroupVersionResource][]string

// AnyResource, as a key of Fields with no paths, says that the user reads
// only the metadata of every typed resource Fields does not name (the
// garbage collector does). It takes no paths: fields have a type.
var AnyResource = schema.GroupVersionResource{}

// CheckFields reports whether every resource of f has a typed informer and
// every path names a field of its objects; the error names the resource,
// the path and the fields there are.
func CheckFields(f Fields) error {
	var errs []error
	for _, gvr := range slices.SortedFunc(maps.Keys(f), func(a, b schema.GroupVersionResource) int {
		return strings.Compare(a.String(), b.String())
	}) {
		if gvr == AnyResource {
			if len(f[gvr]) > 0 {
				errs = append(errs, fmt.Errorf("every resource (AnyResource) with fields %q: "+
					"only metadata can be declared for every resource; name the resource "+
					"whose fields are read", f[gvr]))
			}
			continue
		}
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

// plans are the compiled Fields of the users of a Set.
type plans map[string]userPlans

// userPlans are one user's: by Go type, and whether it reads only the
// metadata of the types it does not name (AnyResource).
type userPlans struct {
	byType       map[reflect.Type]*prune.Plan
	metadataOnly bool
}

// compilePlans compiles reads; what does not compile (CheckFields says
// why) is read whole.
func compilePlans(reads map[string]Fields) plans {
	out := plans{}
	for user, f := range reads {
		u := userPlans{byType: map[reflect.Type]*prune.Plan{}}
		for gvr, paths := range f {
			if gvr == AnyResource {
				u.metadataOnly = len(paths) == 0
				continue
			}
			r, ok := typedResources()[gvr]
			if !ok {
				continue
			}
			if p, err := prune.Compile(r.typ, paths); err == nil {
				u.byType[r.typ] = p
			}
		}
		out[user] = u
	}
	return out
}

// declared is what user declared it reads of objects of typ (a pointer
// type), nil when it did not declare typ.
func (p plans) declared(user string, typ reflect.Type) *prune.Plan {
	u, ok := p[user]
	if !ok {
		return nil
	}
	if plan := u.byType[typ.Elem()]; plan != nil {
		return plan
	}
	if u.metadataOnly {
		if plan, err := prune.Compile(typ.Elem(), nil); err == nil {
			return plan
		}
	}
	return nil
}

// userOf is the user a holder was made for ("" for the Set itself).
func userOf(holder string) string {
	user, _, _ := strings.Cut(holder, "#")
	return user
}

// planFor is what holder reads of objects of typ (a pointer type):
// everything unless its user declared less.
func (p plans) planFor(holder string, typ reflect.Type) *prune.Plan {
	if holder == "" {
		return prune.All(typ.Elem())
	}
	if plan := p.declared(userOf(holder), typ); plan != nil {
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
// name is left whole, or keeps its metadata only under AnyResource. The
// error is CheckFields'.
func (f Fields) Prune(obj runtime.Object) error {
	if err := CheckFields(f); err != nil {
		return err
	}
	typ := reflect.TypeOf(obj)
	if typ == nil || typ.Kind() != reflect.Pointer {
		return nil
	}
	plan := compilePlans(map[string]Fields{"fixture": f}).planFor("fixture#1", typ)
	plan.Apply(obj)
	return nil
}
