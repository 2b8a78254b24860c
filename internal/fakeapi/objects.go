package fakeapi

import (
	"encoding/json"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Objects are stored as JSON-shaped data, as encoding/json decodes a
// body: maps, slices, strings, bools and float64 (Server.Get hands them
// out so); what the server sets itself (generation, grace periods) is
// int64.

// decode decodes a request body that must be a JSON object.
func decode(body []byte) (map[string]any, error) {
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		msg := "the body is not a JSON object"
		if err != nil {
			msg += ": " + err.Error()
		}
		return nil, apierrors.NewBadRequest(msg)
	}
	return obj, nil
}

// normalize re-decodes obj, so that its numbers are as decode makes them.
func normalize(obj any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return decode(data)
}

// metaOf returns obj's metadata map, creating it.
func metaOf(obj map[string]any) map[string]any {
	m, ok := obj["metadata"].(map[string]any)
	if !ok {
		m = map[string]any{}
		obj["metadata"] = m
	}
	return m
}

func nestedString(obj map[string]any, path ...string) (string, bool) {
	v, ok := nested(obj, path...)
	s, isString := v.(string)
	return s, ok && isString
}

// nested is the value at path in obj.
func nested(obj map[string]any, path ...string) (any, bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return copyValue(m).(map[string]any)
}

func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = copyValue(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = copyValue(x)
		}
		return out
	}
	return v
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// finalizers are the names in metadata.finalizers.
func finalizers(meta map[string]any) []string {
	var out []string
	list, _ := meta["finalizers"].([]any)
	for _, f := range list {
		if s, ok := f.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func setFinalizers(meta map[string]any, names []string) {
	if len(names) == 0 {
		delete(meta, "finalizers")
		return
	}
	list := make([]any, len(names))
	for i, n := range names {
		list[i] = n
	}
	meta["finalizers"] = list
}

// newFinalizers are the finalizers of next that cur lacks.
func newFinalizers(cur, next map[string]any) []string {
	var out []string
	old := finalizers(metaOf(cur))
	for _, f := range finalizers(metaOf(next)) {
		if !slices.Contains(old, f) {
			out = append(out, f)
		}
	}
	return out
}

func deleting(obj map[string]any) bool {
	_, ok := metaOf(obj)["deletionTimestamp"]
	return ok
}

// timestamp formats t as metadata timestamps are.
func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func key(r Resource, ns, name string) string {
	if !r.Namespaced {
		ns = ""
	}
	return ns + "/" + name
}
