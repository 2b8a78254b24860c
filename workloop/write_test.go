package workloop_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/ctrlhost/ctrlhost/internal/fakeapi"
	"github.com/ctrlhost/ctrlhost/workloop"
)

var (
	widgets = schema.GroupVersionResource{
		Group:    "example.com",
		Version:  "v1",
		Resource: "widgets",
	}
	widgetGVK  = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

func writerOver(t *testing.T) (workloop.Writer, dynamic.Interface) {
	t.Helper()
	s := fakeapi.New()
	s.AddResource(fakeapi.Resource{GVR: widgets, Kind: "Widget", Namespaced: true, Status: true})
	dyn, err := dynamic.NewForConfig(fakeapi.Config(s, nil))
	if err != nil {
		t.Fatal(err)
	}
	return workloop.Writer{Client: dyn, FieldManager: "widget-controller"}, dyn
}

func widget(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "ns"},
		"spec":     map[string]any{"size": int64(2)},
	}}
}

// ApplyOwned creates, then updates, an owned object that names its owner
// as controller; a typed object needs no apiVersion and kind.
func TestWriterApplyOwned(t *testing.T) {
	ctx := context.Background()
	w, dyn := writerOver(t)
	owner, err := dyn.Resource(widgets).
		Namespace("ns").
		Create(ctx, widget("w"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	desired := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w-config", Namespace: "ns"},
		Data: map[string]string{"size": "2"}}
	got, err := w.ApplyOwned(ctx, configmaps, desired, owner, widgetGVK, "ns/w")
	if err != nil {
		t.Fatal(err)
	}
	refs := got.GetOwnerReferences()
	if len(refs) != 1 || refs[0].UID != owner.GetUID() || refs[0].Controller == nil || !*refs[0].Controller ||
		refs[0].Kind != "Widget" || refs[0].BlockOwnerDeletion == nil ||
		!*refs[0].BlockOwnerDeletion {
		t.Errorf("owner references %+v, want the widget as controller, blocking its deletion", refs)
	}
	desired.Data["size"] = "3"
	if got, err = w.ApplyOwned(ctx, configmaps, desired, owner, widgetGVK, "ns/w"); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(got.Object, "data", "size"); v != "3" ||
		len(got.GetOwnerReferences()) != 1 {
		t.Errorf("second apply: size %q, owners %v", v, got.GetOwnerReferences())
	}
	if _, err := (workloop.Writer{Client: dyn}).ApplyOwned(ctx, configmaps, desired, owner, widgetGVK, ""); err == nil {
		t.Error("a Writer without FieldManager applied")
	}
}

// ApplyStatus changes the status and nothing else, and conditions carry
// the generation they were computed for.
func TestWriterApplyStatus(t *testing.T) {
	ctx := context.Background()
	w, dyn := writerOver(t)
	obj, err := dyn.Resource(widgets).
		Namespace("ns").
		Create(ctx, widget("w"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var conds []metav1.Condition
	if !workloop.SetCondition(
		&conds,
		metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Made"},
		obj.GetGeneration(),
	) {
		t.Error("SetCondition reported no change for a new condition")
	}
	if workloop.SetCondition(
		&conds,
		metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Made"},
		obj.GetGeneration(),
	) {
		t.Error("SetCondition reported a change for the same condition")
	}
	st := obj.DeepCopy()
	_ = unstructured.SetNestedField(st.Object, "spec-change-ignored", "spec", "size")
	_ = unstructured.SetNestedSlice(st.Object, []any{map[string]any{
		"type": "Ready", "status": "True", "reason": "Made", "message": "",
		"observedGeneration": conds[0].ObservedGeneration,
		"lastTransitionTime": conds[0].LastTransitionTime.UTC().Format("2006-01-02T15:04:05Z"),
	}}, "status", "conditions")
	got, err := w.ApplyStatus(ctx, widgets, st, "ns/w")
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 2 {
		t.Errorf("spec.size after a status apply = %d, want 2 (unchanged)", size)
	}
	if cs, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions"); len(cs) != 1 {
		t.Errorf("status.conditions = %v", cs)
	}
}

// Finalize adds the finalizer while the object lives; once it is being
// deleted it runs the cleanup, then removes the finalizer, and the object
// goes. A failing cleanup keeps the finalizer.
func TestWriterFinalize(t *testing.T) {
	ctx := context.Background()
	w, dyn := writerOver(t)
	res := dyn.Resource(widgets).Namespace("ns")
	obj, err := res.Create(ctx, widget("w"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const fin = "example.com/cleanup"
	if deleting, err := w.Finalize(ctx, widgets, obj, fin, "ns/w", nil); deleting || err != nil {
		t.Fatalf("Finalize on a live object: %v, %v", deleting, err)
	}
	if obj, err = res.Get(ctx, "w", metav1.GetOptions{}); err != nil ||
		len(obj.GetFinalizers()) != 1 {
		t.Fatalf("finalizers %v, %v", obj.GetFinalizers(), err)
	}
	if err := res.Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	obj, _ = res.Get(ctx, "w", metav1.GetOptions{})
	boom := errors.New("cleanup failed")
	if deleting, err := w.Finalize(ctx, widgets, obj, fin, "ns/w", func(context.Context) error { return boom }); !deleting ||
		!errors.Is(err, boom) {
		t.Fatalf("Finalize with a failing cleanup: %v, %v", deleting, err)
	}
	if obj, err = res.Get(ctx, "w", metav1.GetOptions{}); err != nil ||
		len(obj.GetFinalizers()) != 1 {
		t.Fatalf("after a failed cleanup: %v, %v; want the finalizer kept", obj, err)
	}
	cleaned := false
	if deleting, err := w.Finalize(ctx, widgets, obj, fin, "ns/w", func(context.Context) error {
		cleaned = true
		return nil
	}); !deleting || err != nil || !cleaned {
		t.Fatalf("Finalize: deleting %v, err %v, cleaned %v", deleting, err, cleaned)
	}
	if _, err := res.Get(ctx, "w", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the finalizer went: %v, want NotFound", err)
	}
	// A stale object fails with a conflict, not a lost finalizer.
	obj, _ = res.Create(ctx, widget("v"), metav1.CreateOptions{})
	stale := obj.DeepCopy()
	obj.SetLabels(map[string]string{"a": "b"})
	if _, err := res.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finalize(ctx, widgets, stale, fin, "", nil); !apierrors.IsConflict(err) {
		t.Errorf("Finalize with a stale object: %v, want Conflict", err)
	}
}
