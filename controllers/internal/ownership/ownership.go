// Package ownership decides which dependents (typically pods) an owning
// controller object controls, adopting and releasing them through
// ControllerRef patches, the way kube-controller-manager's ControllerRef
// managers do. It works for any owner kind: the owner is a metav1.Object
// plus its GroupVersionKind.
//
// Guarantees:
//   - A dependent controlled by another owner (by UID) is never touched.
//   - An orphan is adopted only if it matches the selector, is in the owner's
//     namespace, is not being deleted, and the owner is not being deleted; and
//     only after one uncached read of the owner (Recheck), per RefManager,
//     confirmed that the owner still exists with the same UID and no
//     deletionTimestamp. The adoption patch carries the dependent's UID, so
//     it cannot land on a recreated namesake.
//   - An owned dependent that no longer matches is released (its
//     ControllerRef removed by UID), unless the owner is being deleted.
//   - A dependent whose ownerReferences are malformed (an empty field, more
//     than one controller) is neither adopted, released nor claimed; Claim
//     reports it with an *InvalidRefsError.
//
// Non-guarantees: a claimed adoptee is returned as it was passed in (the
// patched copy is not read back); the answer reflects the caller's cache.
package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Config is what a RefManager needs; every field is required.
type Config struct {
	// Owner is the controlling object, usually from an informer cache. It
	// is only read.
	Owner metav1.Object
	// OwnerKind is the owner's group, version and kind, written into
	// adoption ControllerRefs.
	OwnerKind schema.GroupVersionKind
	// Selector selects the dependents the owner wants.
	Selector labels.Selector
	// Patch applies a strategic-merge patch to the named dependent.
	Patch func(ctx context.Context, namespace, name string, patch []byte) error
	// Recheck reads the owner from the API server, bypassing caches. It is
	// called at most once, before the first adoption.
	Recheck func(ctx context.Context) (metav1.Object, error)
}

// RefManager claims dependents of type T for one owner. It is meant for one
// sync: create a new one each time, so that the owner is rechecked.
type RefManager[T metav1.Object] struct {
	cfg Config

	once     sync.Once
	adoptErr error
}

// New returns a RefManager, or an error naming every missing field of cfg.
func New[T metav1.Object](cfg Config) (*RefManager[T], error) {
	var errs []error
	if cfg.Owner == nil {
		errs = append(errs, errors.New("Owner must not be nil"))
	} else if cfg.Owner.GetUID() == "" || cfg.Owner.GetName() == "" {
		errs = append(errs, errors.New("Owner must have a name and a UID"))
	}
	if cfg.OwnerKind.Kind == "" || cfg.OwnerKind.Version == "" {
		errs = append(errs, errors.New("OwnerKind must have a version and a kind"))
	}
	if cfg.Selector == nil {
		errs = append(errs, errors.New("Selector must not be nil"))
	}
	if cfg.Patch == nil {
		errs = append(errs, errors.New("Patch must not be nil"))
	}
	if cfg.Recheck == nil {
		errs = append(errs, errors.New("Recheck must not be nil"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("ownership: invalid config: %w", errors.Join(errs...))
	}
	return &RefManager[T]{cfg: cfg}, nil
}

// Claim returns the objects of objs the owner controls after adopting
// matching orphans and releasing owned objects that stopped matching. An
// object is wanted when the selector matches it and every filter returns
// true. The error joins one error per object that could not be adopted or
// released, or whose ownerReferences are malformed; objects that vanished
// meanwhile are skipped silently.
func (m *RefManager[T]) Claim(ctx context.Context, objs []T, filters ...func(T) bool) ([]T, error) {
	var claimed []T
	var errs []error
	wanted := func(obj T) bool {
		if !m.cfg.Selector.Matches(labels.Set(obj.GetLabels())) {
			return false
		}
		for _, f := range filters {
			if !f(obj) {
				return false
			}
		}
		return true
	}
	for _, obj := range objs {
		ok, err := m.claim(ctx, obj, wanted)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			claimed = append(claimed, obj)
		}
	}
	return claimed, errors.Join(errs...)
}

func (m *RefManager[T]) claim(ctx context.Context, obj T, wanted func(T) bool) (bool, error) {
	if err := ValidateOwnerRefs(obj); err != nil {
		return false, err
	}
	owner := m.cfg.Owner
	ownerDeleting := owner.GetDeletionTimestamp() != nil
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		switch {
		case ref.UID != owner.GetUID():
			return false, nil // someone else's
		case wanted(obj):
			return true, nil
		case ownerDeleting:
			return false, nil // let the garbage collector have it
		}
		if err := m.Release(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return false, nil
	}
	if ownerDeleting || !wanted(obj) || obj.GetDeletionTimestamp() != nil {
		return false, nil
	}
	if ns := owner.GetNamespace(); ns != "" && ns != obj.GetNamespace() {
		return false, nil
	}
	if err := m.Adopt(ctx, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// Adopt makes the owner obj's controller, after the owner recheck.
func (m *RefManager[T]) Adopt(ctx context.Context, obj T) error {
	if err := m.canAdopt(ctx); err != nil {
		return fmt.Errorf(
			"cannot adopt %s/%s (%s): %w",
			obj.GetNamespace(),
			obj.GetName(),
			obj.GetUID(),
			err,
		)
	}
	patch, err := AdoptPatch(m.cfg.Owner, m.cfg.OwnerKind, obj.GetUID())
	if err != nil {
		return err
	}
	return m.cfg.Patch(ctx, obj.GetNamespace(), obj.GetName(), patch)
}

// Release removes the owner's reference from obj. It succeeds when obj is
// gone or was replaced by a namesake (the patch's UID then does not match).
func (m *RefManager[T]) Release(ctx context.Context, obj T) error {
	patch, err := ReleasePatch(obj.GetUID(), m.cfg.Owner.GetUID())
	if err != nil {
		return err
	}
	err = m.cfg.Patch(ctx, obj.GetNamespace(), obj.GetName(), patch)
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}

// canAdopt rechecks the owner once per RefManager.
func (m *RefManager[T]) canAdopt(ctx context.Context) error {
	m.once.Do(func() {
		owner := m.cfg.Owner
		fresh, err := m.cfg.Recheck(ctx)
		switch {
		case err != nil:
			m.adoptErr = fmt.Errorf(
				"rechecking %s %s/%s: %w",
				m.cfg.OwnerKind.Kind,
				owner.GetNamespace(),
				owner.GetName(),
				err,
			)
		case fresh.GetUID() != owner.GetUID():
			m.adoptErr = fmt.Errorf(
				"%s %s/%s is gone: its UID is now %s, was %s",
				m.cfg.OwnerKind.Kind,
				owner.GetNamespace(),
				owner.GetName(),
				fresh.GetUID(),
				owner.GetUID(),
			)
		case fresh.GetDeletionTimestamp() != nil:
			m.adoptErr = fmt.Errorf(
				"%s %s/%s is being deleted (since %v)",
				m.cfg.OwnerKind.Kind,
				owner.GetNamespace(),
				owner.GetName(),
				fresh.GetDeletionTimestamp(),
			)
		}
	})
	return m.adoptErr
}

// InvalidRefsError reports a dependent whose ownerReferences the API server
// would not accept; ownership leaves such an object alone.
type InvalidRefsError struct {
	Namespace, Name string
	Reason          string
}

func (e *InvalidRefsError) Error() string {
	return fmt.Sprintf("%s/%s has malformed ownerReferences: %s", e.Namespace, e.Name, e.Reason)
}

// ValidateOwnerRefs returns an *InvalidRefsError if one of obj's
// ownerReferences lacks apiVersion, kind, name or uid, or if more than one
// is marked controller.
func ValidateOwnerRefs(obj metav1.Object) error {
	controllers := 0
	for i, r := range obj.GetOwnerReferences() {
		for _, f := range []struct{ name, value string }{
			{"apiVersion", r.APIVersion}, {"kind", r.Kind}, {"name", r.Name}, {"uid", string(r.UID)},
		} {
			if f.value == "" {
				return &InvalidRefsError{
					obj.GetNamespace(),
					obj.GetName(),
					fmt.Sprintf("ownerReferences[%d].%s is empty", i, f.name),
				}
			}
		}
		if r.Controller != nil && *r.Controller {
			controllers++
		}
	}
	if controllers > 1 {
		return &InvalidRefsError{
			obj.GetNamespace(),
			obj.GetName(),
			fmt.Sprintf(
				"%d ownerReferences are marked controller, at most one may be",
				controllers,
			),
		}
	}
	return nil
}

// AdoptPatch returns the strategic-merge patch that adds owner as the
// controller of the dependent with UID dependent. The UID in the patch makes
// the API server reject it if the dependent was replaced by a namesake.
func AdoptPatch(
	owner metav1.Object,
	kind schema.GroupVersionKind,
	dependent types.UID,
) ([]byte, error) {
	yes := true
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"uid": dependent,
			"ownerReferences": []metav1.OwnerReference{{
				APIVersion:         kind.GroupVersion().String(),
				Kind:               kind.Kind,
				Name:               owner.GetName(),
				UID:                owner.GetUID(),
				Controller:         &yes,
				BlockOwnerDeletion: &yes,
			}},
		},
	})
}

// ReleasePatch returns the strategic-merge patch that removes the
// reference to owner from the dependent with UID dependent.
func ReleasePatch(dependent, owner types.UID) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"uid": dependent,
			"ownerReferences": []map[string]string{
				{"$patch": "delete", "uid": string(owner)},
			},
		},
	})
}

// Owner returns the owner ref names as get finds it (from a cache): when
// ref is of kind and get returns an object of ref's UID. A recreated
// namesake (another UID) is not the owner.
func Owner[T metav1.Object](ref *metav1.OwnerReference, kind string,
	get func(name string) (T, error)) (T, bool) {
	var none T
	if ref.Kind != kind {
		return none, false
	}
	obj, err := get(ref.Name)
	if err != nil || obj.GetUID() != ref.UID {
		return none, false
	}
	return obj, true
}

// Selecting returns those of candidates whose label selector matches lbls
// (an orphan's labels), as a controller looks for the owners that may adopt
// an orphan. No labels, and an empty or invalid selector, match nothing.
func Selecting[T any](candidates []T, selector func(T) *metav1.LabelSelector,
	lbls map[string]string) []T {
	if len(lbls) == 0 {
		return nil
	}
	var out []T
	for _, c := range candidates {
		sel, err := metav1.LabelSelectorAsSelector(selector(c))
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(lbls)) {
			continue
		}
		out = append(out, c)
	}
	return out
}
