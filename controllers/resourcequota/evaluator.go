package resourcequota

import (
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
)

// listFunc lists the objects of one resource in a namespace.
type listFunc func(namespace string) ([]runtime.Object, error)

// scopeFunc tells whether an object falls in one scope requirement.
type scopeFunc func(req corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error)

// evaluator measures one resource's usage in a namespace.
type evaluator struct {
	resource schema.GroupResource
	list     listFunc
	// matching returns the names of in that this evaluator measures.
	matching func(in []corev1.ResourceName) []corev1.ResourceName
	// scope matches objects to scopes; nil matches none (an object count
	// under any scope counts nothing, as in KCM).
	scope scopeFunc
	// usage is one object's usage.
	usage func(obj runtime.Object) (corev1.ResourceList, error)
}

// objectCountName is the quota name of a resource's object count:
// count/<resource> for the core group, count/<resource>.<group> otherwise.
func objectCountName(gr schema.GroupResource) corev1.ResourceName {
	if gr.Group == "" {
		return corev1.ResourceName("count/" + gr.Resource)
	}
	return corev1.ResourceName("count/" + gr.Resource + "." + gr.Group)
}

// newCountEvaluator counts a resource's objects under its count/ name and,
// when alias is set, under that name too (secrets, configmaps...).
func newCountEvaluator(
	gr schema.GroupResource,
	list listFunc,
	alias corev1.ResourceName,
) *evaluator {
	names := []corev1.ResourceName{objectCountName(gr)}
	if alias != "" {
		names = append(names, alias)
	}
	return &evaluator{
		resource: gr,
		list:     list,
		matching: func(in []corev1.ResourceName) []corev1.ResourceName { return intersect(in, names) },
		usage: func(runtime.Object) (corev1.ResourceList, error) {
			out := corev1.ResourceList{}
			for _, n := range names {
				out[n] = one()
			}
			return out, nil
		},
	}
}

// scopeRequirements are a quota's scopes (each as an Exists requirement)
// followed by its scope selector's expressions.
func scopeRequirements(
	scopes []corev1.ResourceQuotaScope,
	sel *corev1.ScopeSelector,
) []corev1.ScopedResourceSelectorRequirement {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, s := range scopes {
		out = append(
			out,
			corev1.ScopedResourceSelectorRequirement{
				ScopeName: s,
				Operator:  corev1.ScopeSelectorOpExists,
			},
		)
	}
	if sel != nil {
		out = append(out, sel.MatchExpressions...)
	}
	return out
}

// usageStats sums the usage of the objects of namespace that fall in every
// scope requirement; every one of resources is reported, zero when unused.
// As in KCM, an object whose scope cannot be decided ends the sum without
// an error, with what was summed so far.
func (e *evaluator) usageStats(
	namespace string,
	reqs []corev1.ScopedResourceSelectorRequirement,
	resources []corev1.ResourceName,
) (corev1.ResourceList, error) {
	used := corev1.ResourceList{}
	for _, name := range resources {
		used[name] = zero()
	}
	items, err := e.list(namespace)
	if err != nil {
		return used, fmt.Errorf("failed to list content: %w", err)
	}
	for _, item := range items {
		in := true
		for _, req := range reqs {
			ok := false
			if e.scope != nil {
				if ok, err = e.scope(req, item); err != nil {
					return used, nil
				}
			}
			in = in && ok
		}
		if !in {
			continue
		}
		u, err := e.usage(item)
		if err != nil {
			return used, err
		}
		used = addLists(used, u)
	}
	return used, nil
}

// scopeSelector turns a scope requirement into a label selector over the
// single label <scopeName>=<value>.
func scopeSelector(req corev1.ScopedResourceSelectorRequirement) (labels.Selector, error) {
	var op selection.Operator
	switch req.Operator {
	case corev1.ScopeSelectorOpIn:
		op = selection.In
	case corev1.ScopeSelectorOpNotIn:
		op = selection.NotIn
	case corev1.ScopeSelectorOpExists:
		op = selection.Exists
	case corev1.ScopeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	default:
		return nil, fmt.Errorf("%q is not a valid scope selector operator", req.Operator)
	}
	r, err := labels.NewRequirement(string(req.ScopeName), op, req.Values)
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*r), nil
}

// registry holds the evaluators by resource. Discovery adds object-count
// evaluators while workers read it.
type registry struct {
	mu    sync.RWMutex
	byRes map[schema.GroupResource]*evaluator
}

func newRegistry(es ...*evaluator) *registry {
	r := &registry{byRes: map[schema.GroupResource]*evaluator{}}
	for _, e := range es {
		r.byRes[e.resource] = e
	}
	return r
}

func (r *registry) get(gr schema.GroupResource) *evaluator {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byRes[gr]
}

// addIfAbsent adds e unless its resource has an evaluator; it reports
// whether e was added.
func (r *registry) addIfAbsent(e *evaluator) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byRes[e.resource]; ok {
		return false
	}
	r.byRes[e.resource] = e
	return true
}

func (r *registry) list() []*evaluator {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*evaluator, 0, len(r.byRes))
	for _, e := range r.byRes {
		out = append(out, e)
	}
	return out
}

// matchesAny reports whether some evaluator measures one of names.
func (r *registry) matchesAny(names []corev1.ResourceName) bool {
	for _, e := range r.list() {
		if len(e.matching(names)) > 0 {
			return true
		}
	}
	return false
}

// calculateUsage measures, for the resources of hard that some evaluator
// knows, the usage in namespace under the quota's scopes. A resource whose
// evaluator failed is left out of the answer, and the failures returned
// joined.
func calculateUsage(
	namespace string,
	scopes []corev1.ResourceQuotaScope,
	sel *corev1.ScopeSelector,
	hard corev1.ResourceList,
	reg *registry,
) (corev1.ResourceList, error) {
	hardNames := resourceNames(hard)
	evaluators := reg.list()
	var potential []corev1.ResourceName
	for _, e := range evaluators {
		potential = append(potential, e.matching(hardNames)...)
	}
	matched := intersect(hardNames, potential)
	reqs := scopeRequirements(scopes, sel)
	var errs []error
	used := corev1.ResourceList{}
	for _, e := range evaluators {
		names := e.matching(matched)
		if len(names) == 0 {
			continue
		}
		u, err := e.usageStats(namespace, reqs, names)
		if err != nil {
			errs = append(errs, err)
			matched = without(matched, names)
			continue
		}
		used = addLists(used, u)
	}
	return maskList(used, matched), errors.Join(errs...)
}

// without returns the names of a that are not in b.
func without(a, b []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range a {
		if !containsName(b, n) {
			out = append(out, n)
		}
	}
	return out
}

func containsName(l []corev1.ResourceName, n corev1.ResourceName) bool {
	for _, x := range l {
		if x == n {
			return true
		}
	}
	return false
}
