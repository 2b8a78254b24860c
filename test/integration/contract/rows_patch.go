package contract

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// owner is an owner reference to a ConfigMap of the given name and uid.
func owner(name, uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name,
		UID: types.UID(uid)}
}

const (
	uidA = "00000000-0000-0000-0000-00000000000a"
	uidB = "00000000-0000-0000-0000-00000000000b"
	uidC = "00000000-0000-0000-0000-00000000000c"
)

// ownedConfigMap creates a ConfigMap with owners a and b and finalizers
// x/a and x/b.
func (e *Env) ownedConfigMap(ctx context.Context) (*corev1.ConfigMap, error) {
	cm := configMap("a", "k", "1")
	cm.OwnerReferences = []metav1.OwnerReference{owner("a", uidA), owner("b", uidB)}
	cm.Finalizers = []string{"x/a", "x/b"}
	got, err := e.configMaps().Create(ctx, cm, metav1.CreateOptions{})
	return got, step("create", err)
}

// ownerUIDs lists the uids of cm's owner references.
func ownerUIDs(cm *corev1.ConfigMap) []string {
	var out []string
	for _, o := range cm.OwnerReferences {
		out = append(out, string(o.UID))
	}
	slices.Sort(out)
	return out
}

// strategic sends a strategic merge patch of e's ConfigMap "a".
func (e *Env) strategic(ctx context.Context, patch string) (*corev1.ConfigMap, error) {
	got, err := e.configMaps().Patch(ctx, "a", types.StrategicMergePatchType, []byte(patch),
		metav1.PatchOptions{})
	return got, step("strategic merge patch "+patch, err)
}

var patchRows = []Row{{
	Name: "patch/json-merge",
	Promise: "a JSON merge patch merges maps, deletes the keys it sets to null and " +
		"replaces lists",
	Run: func(ctx context.Context, e *Env) error {
		w := custom(Widgets, "w", spec("size", int64(1), "keep", "k", "items", []any{"x", "y"}))
		if _, err := e.of(Widgets).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
		got, err := e.of(Widgets).Patch(ctx, "w", types.MergePatchType,
			[]byte(`{"spec":{"size":null,"items":["z"]}}`), metav1.PatchOptions{})
		if err != nil {
			return step("patch", err)
		}
		want := map[string]any{"keep": "k", "items": []any{"z"}}
		if s, _, _ := unstructured.NestedMap(got.Object, "spec"); fmt.Sprint(
			s,
		) != fmt.Sprint(
			want,
		) {
			return fmt.Errorf("spec %v, want %v", s, want)
		}
		return nil
	},
}, {
	Name:    "patch/stale-resource-version-is-409",
	Promise: "a patch that names a resourceVersion other than the stored one is 409 Conflict",
	Run: func(ctx context.Context, e *Env) error {
		cm, err := e.configMaps().Create(ctx, configMap("a", "k", "1"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		cm.Data["k"] = "2"
		if _, err := e.configMaps().Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return step("update", err)
		}
		// cm.ResourceVersion is the create's.
		patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"data":{"k":"3"}}`,
			cm.ResourceVersion)
		_, err = e.configMaps().Patch(ctx, "a", types.MergePatchType, []byte(patch),
			metav1.PatchOptions{})
		return wantStatus("patch", err, http.StatusConflict, metav1.StatusReasonConflict)
	},
}, {
	Name: "patch/strategic-merges-lists-by-key",
	Promise: "a strategic merge patch of a built-in object merges ownerReferences by uid " +
		"and adds to finalizers",
	Run: func(ctx context.Context, e *Env) error {
		cm := configMap("a")
		cm.OwnerReferences = []metav1.OwnerReference{owner("a", uidA)}
		cm.Finalizers = []string{"x/a"}
		if _, err := e.configMaps().Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
		got, err := e.strategic(ctx, fmt.Sprintf(
			`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap",`+
				`"name":"b","uid":%q}],"finalizers":["x/b"]}}`, uidB))
		if err != nil {
			return err
		}
		uids, fins := ownerUIDs(got), slices.Sorted(slices.Values(got.Finalizers))
		if !slices.Equal(uids, []string{uidA, uidB}) ||
			!slices.Equal(fins, []string{"x/a", "x/b"}) {
			return fmt.Errorf("owners %v and finalizers %v, want both merged", uids, fins)
		}
		return e.clearFinalizers(ctx)
	},
}, {
	Name: "patch/strategic-delete-from-primitive-list",
	Promise: "a strategic merge patch's $deleteFromPrimitiveList/finalizers removes " +
		"those finalizers",
	Run: func(ctx context.Context, e *Env) error {
		if _, err := e.ownedConfigMap(ctx); err != nil {
			return err
		}
		got, err := e.strategic(ctx, `{"metadata":{"$deleteFromPrimitiveList/finalizers":["x/a"]}}`)
		if err != nil {
			return err
		}
		if !slices.Equal(got.Finalizers, []string{"x/b"}) {
			return fmt.Errorf("finalizers %q, want [x/b]", got.Finalizers)
		}
		return e.clearFinalizers(ctx)
	},
}, {
	Name: "patch/strategic-patch-delete-by-merge-key",
	Promise: "a strategic merge patch's {$patch: delete, uid: …} in ownerReferences " +
		"removes that owner and keeps the others",
	Run: func(ctx context.Context, e *Env) error {
		if _, err := e.ownedConfigMap(ctx); err != nil {
			return err
		}
		got, err := e.strategic(ctx, fmt.Sprintf(
			`{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}]}}`, uidA))
		if err != nil {
			return err
		}
		if uids := ownerUIDs(got); !slices.Equal(uids, []string{uidB}) {
			return fmt.Errorf("owners %v, want only %s", uids, uidB)
		}
		return e.clearFinalizers(ctx)
	},
}, {
	Name: "patch/strategic-patch-replace",
	Promise: "a strategic merge patch's $patch: replace replaces a map, or a list merged " +
		"by key, whole",
	Run: func(ctx context.Context, e *Env) error {
		if _, err := e.ownedConfigMap(ctx); err != nil {
			return err
		}
		got, err := e.strategic(ctx, fmt.Sprintf(`{"data":{"$patch":"replace","n":"2"},`+
			`"metadata":{"ownerReferences":[{"$patch":"replace"},{"apiVersion":"v1",`+
			`"kind":"ConfigMap","name":"c","uid":%q}]}}`, uidC))
		if err != nil {
			return err
		}
		if uids := ownerUIDs(got); !slices.Equal(uids, []string{uidC}) || len(got.Data) != 1 ||
			got.Data["n"] != "2" {
			return fmt.Errorf(
				"owners %v, data %v; want only %s, and only n=2",
				uids,
				got.Data,
				uidC,
			)
		}
		return e.clearFinalizers(ctx)
	},
}, {
	Name: "patch/strategic-on-custom-resource-is-415",
	Promise: "a strategic merge patch of a custom resource is 415 Unsupported Media Type " +
		"(no Go type declares its merge keys)",
	Run: func(ctx context.Context, e *Env) error {
		if _, err := e.of(Widgets).Create(ctx, custom(Widgets, "w", spec("size", int64(1))),
			metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
		_, err := e.of(Widgets).Patch(ctx, "w", types.StrategicMergePatchType,
			[]byte(`{"spec":{"size":2}}`), metav1.PatchOptions{})
		return wantStatus("strategic merge patch", err, http.StatusUnsupportedMediaType,
			metav1.StatusReasonUnsupportedMediaType)
	},
}, {
	Name:        "patch/json-patch",
	Promise:     "a JSON patch (RFC 6902) applies its operations",
	NotModelled: "JSON patch (application/json-patch+json) is not supported",
	Run: func(ctx context.Context, e *Env) error {
		if _, err := e.configMaps().Create(ctx, configMap("a", "k", "1"),
			metav1.CreateOptions{}); err != nil {
			return step("create", err)
		}
		got, err := e.configMaps().Patch(ctx, "a", types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/data/k","value":"2"}]`), metav1.PatchOptions{})
		if err != nil {
			return step("JSON patch", err)
		}
		if got.Data["k"] != "2" {
			return fmt.Errorf("data %v, want k=2", got.Data)
		}
		return nil
	},
}, {
	Name: "patch/no-op-keeps-resource-version",
	Promise: "a patch that changes nothing writes nothing: the resourceVersion stays and " +
		"watchers get no event",
	Run: func(ctx context.Context, e *Env) error {
		cm, err := e.configMaps().Create(ctx, configMap("a", "k", "1"), metav1.CreateOptions{})
		if err != nil {
			return step("create", err)
		}
		w, err := e.configMaps().Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
		if err != nil {
			return step("watch", err)
		}
		defer w.Stop()
		for _, pt := range []types.PatchType{types.MergePatchType, types.StrategicMergePatchType} {
			got, err := e.configMaps().Patch(ctx, "a", pt, []byte(`{"data":{"k":"1"}}`),
				metav1.PatchOptions{})
			if err != nil {
				return step(string(pt), err)
			}
			if err := sameRV("a no-op "+string(pt), cm, got); err != nil {
				return err
			}
		}
		return noEventBefore(ctx, w, e.markConfigMap)
	},
}, {
	Name:    "patch/missing-is-404",
	Promise: "a patch of an object that does not exist is 404 NotFound",
	Run: func(ctx context.Context, e *Env) error {
		_, err := e.configMaps().Patch(ctx, "nope", types.MergePatchType, []byte(`{}`),
			metav1.PatchOptions{})
		return wantStatus("patch", err, http.StatusNotFound, metav1.StatusReasonNotFound)
	},
}}

// clearFinalizers removes every finalizer of e's ConfigMap "a", so that
// deleting the row's namespace could remove it.
func (e *Env) clearFinalizers(ctx context.Context) error {
	_, err := e.configMaps().Patch(ctx, "a", types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	return step("clearing the finalizers", err)
}
