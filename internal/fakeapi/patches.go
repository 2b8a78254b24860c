package fakeapi

import (
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// The patch types the server takes, by Content-Type.
const (
	mergePatch     = "application/merge-patch+json"
	strategicPatch = "application/strategic-merge-patch+json"
	applyYAML      = "application/apply-patch+yaml"
	jsonPatch      = "application/json-patch+json"
)

// patch applies a JSON merge patch, a strategic merge patch (a built-in
// resource's, with the directives and merge keys of its Go type) or a
// server-side apply patch (with field ownership: managers, conflicts,
// fields a manager stops applying are removed).
func (s *Server) patch(r Resource, ns, name, sub, contentType string, body []byte,
	opts options) (map[string]any, error) {
	contentType, _, _ = strings.Cut(contentType, ";")
	switch contentType {
	case mergePatch, strategicPatch:
	case applyYAML, "application/apply-patch+json":
		return s.apply(r, ns, name, sub, body, opts)
	case jsonPatch:
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
			Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: "fakeapi: JSON patch (application/json-patch+json) is not supported; " +
				"send a JSON merge, strategic merge or apply patch",
		}}
	default:
		return nil, unsupportedMediaType(contentType)
	}
	if contentType == strategicPatch && !r.BuiltIn {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
			Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: "the body of the request was in an unknown format - accepted media " +
				"types include: application/json-patch+json, application/merge-patch+json, " +
				"application/apply-patch+yaml",
		}}
	}
	p, err := decode(body)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.objects[r.GVR][key(r, ns, name)]
	if cur == nil {
		return nil, apierrors.NewNotFound(r.GVR.GroupResource(), name)
	}
	if pm, ok := p["metadata"].(map[string]any); ok {
		if err := checkPreconditions(r, name, cur, pm); err != nil {
			return nil, err
		}
		delete(pm, "resourceVersion") // a precondition, not a change
		delete(pm, "uid")
	}
	var patched map[string]any
	if contentType == strategicPatch {
		if patched, err = strategicMerge(r, cur, p); err != nil {
			return nil, err
		}
	} else {
		patched = mergeJSON(deepCopy(cur), p).(map[string]any)
	}
	next := deepCopy(cur)
	switch {
	case sub == "status":
		next["status"] = patched["status"]
		if next["status"] == nil {
			delete(next, "status")
		}
	case r.Status:
		patched["status"] = cur["status"]
		next = patched
	default:
		next = patched
	}
	prepareUpdate(r, cur, next)
	if err := validateUpdate(r, name, cur, next); err != nil {
		return nil, err
	}
	next = s.managers.update(r, sub, cur, next, opts.manager())
	return s.commit(r, ns, name, cur, next, opts.dryRun), nil
}

// strategicMerge applies a strategic merge patch to cur with the merge
// keys and patch strategies of r's Go type in client-go's scheme.
func strategicMerge(r Resource, cur, p map[string]any) (map[string]any, error) {
	typed, err := scheme.Scheme.New(r.GVK())
	if err != nil {
		return nil, notSupported(fmt.Sprintf("a strategic merge patch of %s, whose Go type "+
			"client-go's scheme does not know, is not supported", r.GVK()))
	}
	out, err := strategicpatch.StrategicMergeMapPatch(deepCopy(cur), p, typed)
	if err != nil {
		return nil, apierrors.NewBadRequest("strategic merge patch: " + err.Error())
	}
	return normalize(out)
}

// mergeJSON applies an RFC 7386 merge patch.
func mergeJSON(doc, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	dm, ok := doc.(map[string]any)
	if !ok {
		dm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(dm, k)
			continue
		}
		dm[k] = mergeJSON(dm[k], v)
	}
	return dm
}

// apply serves a server-side apply patch: it creates the object when it
// is missing (not through a subresource), and otherwise merges it with
// field ownership, as the API server's field manager does.
func (s *Server) apply(r Resource, ns, name, sub string, body []byte,
	opts options) (map[string]any, error) {
	if opts.fieldManager == "" {
		return nil, apierrors.NewInvalid(
			schema.GroupKind{Group: "meta.k8s.io", Kind: "PatchOptions"},
			"",
			field.ErrorList{field.Required(field.NewPath("fieldManager"),
				"is required for apply patch")},
		)
	}
	data, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, apierrors.NewBadRequest("error decoding patch: " + err.Error())
	}
	applied, err := decode(data)
	if err != nil {
		return nil, err
	}
	if n, _ := nestedString(applied, "metadata", "name"); n != "" && n != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf(
			"the name of the object (%s) does not match the name on the URL (%s)", n, name))
	}
	switch {
	case sub == "status":
		applied = map[string]any{"apiVersion": applied["apiVersion"], "kind": applied["kind"],
			"metadata": map[string]any{"name": name}, "status": applied["status"]}
		if applied["status"] == nil {
			delete(applied, "status")
		}
	case r.Status:
		delete(applied, "status")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.objects[r.GVR][key(r, ns, name)]
	if cur == nil && sub != "" {
		return nil, apierrors.NewNotFound(r.GVR.GroupResource(), name)
	}
	live := cur
	if live == nil {
		live = map[string]any{"apiVersion": r.GVR.GroupVersion().String(), "kind": r.Kind,
			"metadata": map[string]any{"name": name}}
	}
	result, err := s.managers.apply(r, sub, live, applied, opts.fieldManager, opts.force)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		metaOf(result)["name"] = name
		opts.applied = true
		return s.createLocked(r, ns, result, opts)
	}
	next := result
	if sub == "status" {
		next = deepCopy(cur)
		next["status"] = result["status"]
		if next["status"] == nil {
			delete(next, "status")
		}
		metaOf(next)["managedFields"] = metaOf(result)["managedFields"]
	} else if r.Status {
		next["status"] = cur["status"]
		if next["status"] == nil {
			delete(next, "status")
		}
	}
	prepareUpdate(r, cur, next)
	if err := validateUpdate(r, name, cur, next); err != nil {
		return nil, err
	}
	return s.commit(r, ns, name, cur, next, opts.dryRun), nil
}
