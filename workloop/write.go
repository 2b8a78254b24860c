package workloop

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
)

// Writer makes the writes an operator's sync makes again and again, over a
// dynamic client (the term's: fenced, with the controller's credentials),
// for built-in and custom resources alike: server-side apply of desired
// objects and of status, and finalizers. Its zero value is not usable;
// fill Client and FieldManager.
type Writer struct {
	// Client is the dynamic client the writes go through, usually
	// descriptor.Context.ClientBuilder.DynamicClient(name).
	Client dynamic.Interface
	// FieldManager names the writer in server-side apply; usually the
	// controller's name. Required.
	FieldManager string
	// Loop, if set, is told of each write (Loop.Wrote), so that its
	// staleness guard holds the key until the informer caught up.
	Loop *Loop
}

// ApplyOwned server-side-applies desired (a typed or unstructured object;
// its apiVersion and kind set, or found in client-go's scheme), as the
// Writer's field manager and forcing conflicts (a controller owns its
// fields), after making owner its controller: an ownerReference with
// controller and blockOwnerDeletion set, so that the garbage collector
// deletes it with owner and the owner's controller can map it back.
// ownerGVK is owner's group, version and kind. key, if not empty, is the
// Loop key the write is recorded under (Loop.Wrote). It returns the object
// as the API server stored it.
func (w Writer) ApplyOwned(
	ctx context.Context,
	gvr schema.GroupVersionResource,
	desired runtime.Object,
	owner metav1.Object,
	ownerGVK schema.GroupVersionKind,
	key string,
) (*unstructured.Unstructured, error) {
	u, err := toUnstructured(desired)
	if err != nil {
		return nil, err
	}
	if owner != nil {
		ref := metav1.NewControllerRef(owner, ownerGVK)
		refs := slices.DeleteFunc(
			u.GetOwnerReferences(),
			func(r metav1.OwnerReference) bool { return r.UID == ref.UID },
		)
		u.SetOwnerReferences(append(refs, *ref))
	}
	return w.apply(ctx, gvr, u, key, "")
}

// ApplyStatus server-side-applies obj's status through the status
// subresource: only the fields set in obj's status are claimed. obj needs
// its apiVersion, kind, namespace and name.
func (w Writer) ApplyStatus(
	ctx context.Context,
	gvr schema.GroupVersionResource,
	obj runtime.Object,
	key string,
) (*unstructured.Unstructured, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	status, found, err := unstructured.NestedFieldCopy(u.Object, "status")
	if err != nil || !found {
		return nil, fmt.Errorf(
			"workloop: %s %s/%s: no status to apply",
			gvr.Resource,
			u.GetNamespace(),
			u.GetName(),
		)
	}
	patch := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata": map[string]any{"name": u.GetName(), "namespace": u.GetNamespace()},
		"status":   status,
	}}
	return w.apply(ctx, gvr, patch, key, "status")
}

func (w Writer) apply(
	ctx context.Context,
	gvr schema.GroupVersionResource,
	u *unstructured.Unstructured,
	key,
	sub string,
) (*unstructured.Unstructured, error) {
	if w.FieldManager == "" {
		return nil, fmt.Errorf(
			"workloop: Writer.FieldManager must be set (server-side apply needs a field manager)",
		)
	}
	u.SetManagedFields(nil)
	u.SetResourceVersion("")
	opts := metav1.ApplyOptions{FieldManager: w.FieldManager, Force: true}
	res := w.resource(gvr, u.GetNamespace())
	var out *unstructured.Unstructured
	var err error
	if sub == "status" {
		out, err = res.ApplyStatus(ctx, u.GetName(), u, opts)
	} else {
		out, err = res.Apply(ctx, u.GetName(), u, opts)
	}
	if err != nil {
		return nil, err
	}
	w.wrote(key, out)
	return out, nil
}

func (w Writer) resource(gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	if ns == "" {
		return w.Client.Resource(gvr)
	}
	return w.Client.Resource(gvr).Namespace(ns)
}

func (w Writer) wrote(key string, obj runtime.Object) {
	if w.Loop != nil && key != "" {
		w.Loop.Wrote(key, obj)
	}
}

// Finalize runs the finalizer's part of a sync. While obj is not being
// deleted it makes sure obj carries finalizer and reports false. Once obj
// is being deleted (deletionTimestamp set) it calls cleanup, if obj still
// carries finalizer, removes finalizer when cleanup succeeded and reports
// true: the sync should then return (the object is going). Both writes are
// JSON patches tested against the resourceVersion read, so a stale obj
// fails with a conflict (retried by the Loop) instead of clobbering
// another writer's finalizers.
func (w Writer) Finalize(
	ctx context.Context,
	gvr schema.GroupVersionResource,
	obj metav1.Object,
	finalizer,
	key string,
	cleanup func(context.Context) error,
) (deleting bool, err error) {
	has := slices.Contains(obj.GetFinalizers(), finalizer)
	switch {
	case obj.GetDeletionTimestamp() == nil:
		if has {
			return false, nil
		}
		return false, w.patchFinalizers(
			ctx,
			gvr,
			obj,
			append(slices.Clone(obj.GetFinalizers()), finalizer),
			key,
		)
	case !has:
		return true, nil
	}
	if cleanup != nil {
		if err := cleanup(ctx); err != nil {
			return true, err
		}
	}
	rest := slices.DeleteFunc(
		slices.Clone(obj.GetFinalizers()),
		func(f string) bool { return f == finalizer },
	)
	err = w.patchFinalizers(ctx, gvr, obj, rest, key)
	if apierrors.IsNotFound(err) {
		err = nil // the last finalizer went and the object with it
	}
	return true, err
}

func (w Writer) patchFinalizers(
	ctx context.Context,
	gvr schema.GroupVersionResource,
	obj metav1.Object,
	finalizers []string,
	key string,
) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": finalizers, "resourceVersion": obj.GetResourceVersion()}})
	if err != nil {
		return err
	}
	out, err := w.resource(gvr, obj.GetNamespace()).
		Patch(ctx, obj.GetName(), types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: w.FieldManager})
	if err == nil {
		w.wrote(key, out)
	}
	return err
}

// SetCondition sets cond in conds, as meta.SetStatusCondition does (its
// LastTransitionTime changes only when its status does), with
// ObservedGeneration set to generation, and reports whether conds changed.
func SetCondition(conds *[]metav1.Condition, cond metav1.Condition, generation int64) bool {
	cond.ObservedGeneration = generation
	return meta.SetStatusCondition(conds, cond)
}

// toUnstructured converts obj, filling apiVersion and kind from client-go's
// scheme for typed objects that leave them empty.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.DeepCopy(), nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" {
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil || len(gvks) == 0 {
			return nil, fmt.Errorf("workloop: %T has no apiVersion and kind: set its TypeMeta", obj)
		}
		u.SetGroupVersionKind(gvks[0])
	}
	return u, nil
}
