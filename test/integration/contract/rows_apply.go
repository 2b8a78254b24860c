package contract

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// apply server-side applies config to e's ConfigMap "a" as manager.
func (e *Env) apply(ctx context.Context, manager string, force bool,
	config string) (*corev1.ConfigMap, error) {
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},` + config + `}`
	opts := metav1.PatchOptions{FieldManager: manager}
	if force {
		opts.Force = ptr.To(true)
	}
	return e.configMaps().Patch(ctx, "a", types.ApplyPatchType, []byte(body), opts)
}

var applyRows = []Row{{
	Name:    "apply/requires-field-manager",
	Promise: "a server-side apply without fieldManager is refused",
	Run: func(ctx context.Context, e *Env) error {
		_, err := e.apply(ctx, "", false, `"data":{"k":"1"}`)
		if err == nil {
			return fmt.Errorf("an apply without fieldManager succeeded")
		}
		return wantStatus("apply", err, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
	},
}, {
	Name: "apply/creates-and-merges",
	Promise: "a server-side apply creates the object, and a later one from the same manager " +
		"sets the fields it names, leaving fields others set",
	Run: func(ctx context.Context, e *Env) error {
		if _, err := e.apply(ctx, "m", false, `"data":{"a":"1"}`); err != nil {
			return step("apply creating", err)
		}
		if _, err := e.configMaps().Patch(ctx, "a", types.MergePatchType,
			[]byte(`{"data":{"other":"x"}}`),
			metav1.PatchOptions{FieldManager: "other"}); err != nil {
			return step("patch by another manager", err)
		}
		got, err := e.apply(ctx, "m", false, `"data":{"a":"1","b":"2"}`)
		if err != nil {
			return step("second apply", err)
		}
		if got.Data["a"] != "1" || got.Data["b"] != "2" || got.Data["other"] != "x" {
			return fmt.Errorf("data %v, want a=1 b=2 other=x", got.Data)
		}
		return nil
	},
}, {
	Name: "apply/no-op-keeps-resource-version",
	Promise: "a server-side apply that changes nothing writes nothing: the resourceVersion " +
		"stays and watchers get no event",
	Run: func(ctx context.Context, e *Env) error {
		first, err := e.apply(ctx, "m", true, `"data":{"a":"1"}`)
		if err != nil {
			return step("apply", err)
		}
		w, err := e.configMaps().
			Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
		if err != nil {
			return step("watch", err)
		}
		defer w.Stop()
		again, err := e.apply(ctx, "m", true, `"data":{"a":"1"}`)
		if err != nil {
			return step("second apply", err)
		}
		if err := sameRV("the same apply again", first, again); err != nil {
			return err
		}
		return noEventBefore(ctx, w, e.markConfigMap)
	},
}, {
	Name: "apply/removes-fields-the-manager-dropped",
	Promise: "a field a manager applied and leaves out of its next apply is removed, " +
		"unless another manager owns it",
	Run: func(ctx context.Context, e *Env) error {
		if _, err := e.apply(ctx, "m", false, `"data":{"a":"1","b":"2"}`); err != nil {
			return step("apply", err)
		}
		got, err := e.apply(ctx, "m", false, `"data":{"a":"1"}`)
		if err != nil {
			return step("second apply", err)
		}
		if _, ok := got.Data["b"]; ok || got.Data["a"] != "1" {
			return fmt.Errorf("data %v, want only a=1", got.Data)
		}
		return nil
	},
}, {
	Name: "apply/conflict-is-409-and-force-takes-over",
	Promise: "a server-side apply that changes a field another manager owns is 409 " +
		"Conflict; with force it applies and takes the field over",
	Run: func(ctx context.Context, e *Env) error {
		if _, err := e.apply(ctx, "first", false, `"data":{"k":"1"}`); err != nil {
			return step("apply", err)
		}
		_, err := e.apply(ctx, "second", false, `"data":{"k":"2"}`)
		if err := wantStatus("a conflicting apply", err, http.StatusConflict,
			metav1.StatusReasonConflict); err != nil {
			return err
		}
		if _, err := e.apply(ctx, "second", true, `"data":{"k":"2"}`); err != nil {
			return step("a forced apply", err)
		}
		// "first" no longer owns k: leaving it out removes nothing.
		got, err := e.apply(ctx, "first", false, `"data":{}`)
		if err != nil {
			return step("apply without k", err)
		}
		if got.Data["k"] != "2" {
			return fmt.Errorf("data %v, want k=2 kept (owned by second)", got.Data)
		}
		return nil
	},
}, {
	Name: "apply/conflict-with-an-update-manager-is-409",
	Promise: "a server-side apply that changes a field last set by an update of another " +
		"manager is 409 Conflict",
	Run: func(ctx context.Context, e *Env) error {
		cm, err := e.configMaps().Create(ctx, configMap("a", "k", "1"),
			metav1.CreateOptions{FieldManager: "creator"})
		if err != nil {
			return step("create", err)
		}
		cm.Data["k"] = "2"
		if _, err := e.configMaps().Update(ctx, cm,
			metav1.UpdateOptions{FieldManager: "updater"}); err != nil {
			return step("update", err)
		}
		_, err = e.apply(ctx, "applier", false, `"data":{"k":"3"}`)
		return wantStatus("apply", err, http.StatusConflict, metav1.StatusReasonConflict)
	},
}, {
	Name: "apply/status-subresource",
	Promise: "a server-side apply to a status subresource changes the status only, and " +
		"not the generation",
	Run: func(ctx context.Context, e *Env) error {
		if _, err := e.of(Widgets).Create(ctx, custom(Widgets, "w", spec("size", int64(1))),
			metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
		body := fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":"w"},`+
			`"spec":{"size":7},"status":{"seen":1}}`, Widgets.APIVersion(), Widgets.Kind)
		got, err := e.of(Widgets).Patch(ctx, "w", types.ApplyPatchType, []byte(body),
			metav1.PatchOptions{FieldManager: "m", Force: ptr.To(true)}, "status")
		if err != nil {
			return step("apply status", err)
		}
		size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size")
		seen, _, _ := unstructured.NestedInt64(got.Object, "status", "seen")
		if size != 1 || seen != 1 {
			return fmt.Errorf("spec.size %d and status.seen %d, want 1 and 1", size, seen)
		}
		return wantGeneration("a status apply", got, 1)
	},
}}
