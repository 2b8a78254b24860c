package fakeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// create stores a new object from body.
func (s *Server) create(r Resource, ns string, body []byte) (map[string]any, error) {
	obj, err := decode(body)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createLocked(r, ns, obj)
}

// createLocked stores obj as a new object. s.mu is held.
func (s *Server) createLocked(r Resource, ns string, obj map[string]any) (map[string]any, error) {
	if s.objects[r.GVR] == nil {
		return nil, apierrors.NewNotFound(r.GVR.GroupResource(), "")
	}
	meta := metaOf(obj)
	name, _ := meta["name"].(string)
	if name == "" {
		if gen, _ := meta["generateName"].(string); gen != "" {
			s.uid++
			name = fmt.Sprintf("%s%05x", gen, s.uid)
		}
	}
	if name == "" {
		return nil, apierrors.NewBadRequest("metadata.name or metadata.generateName is required")
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 && r.GVR.Resource != "events" {
		return nil, apierrors.NewInvalid(r.GVK().GroupKind(), name, nil)
	}
	if r.Namespaced {
		if bodyNS, _ := meta["namespace"].(string); bodyNS != "" && ns != "" && bodyNS != ns {
			return nil, apierrors.NewBadRequest("the namespace of the object does not match the namespace of the request")
		} else if ns == "" {
			ns = bodyNS
		}
		if ns == "" {
			return nil, apierrors.NewBadRequest("a namespace is required")
		}
		meta["namespace"] = ns
	} else {
		delete(meta, "namespace")
	}
	meta["name"] = name
	k := key(r, ns, name)
	if s.objects[r.GVR][k] != nil {
		return nil, apierrors.NewAlreadyExists(r.GVR.GroupResource(), name)
	}
	s.uid++
	meta["uid"] = string(types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012x", s.uid)))
	meta["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	meta["generation"] = int64(1)
	delete(meta, "deletionTimestamp")
	delete(meta, "deletionGracePeriodSeconds")
	if r.Status {
		delete(obj, "status")
	}
	return s.store(r, ns, name, obj, "ADDED"), nil
}

// store sets the object's identity fields and resourceVersion, stores it
// and tells the watchers. s.mu is held.
func (s *Server) store(r Resource, ns, name string, obj map[string]any, typ string) map[string]any {
	s.rv++
	obj["apiVersion"] = r.GVR.GroupVersion().String()
	obj["kind"] = r.Kind
	metaOf(obj)["resourceVersion"] = fmt.Sprint(s.rv)
	k := key(r, ns, name)
	if typ == "DELETED" {
		delete(s.objects[r.GVR], k)
	} else {
		s.objects[r.GVR][k] = obj
	}
	ev := event{rv: s.rv, typ: typ, gvr: r.GVR, ns: ns, name: name, obj: deepCopy(obj)}
	s.history = append(s.history, ev)
	if len(s.history) > maxHistory {
		s.oldest = s.history[0].rv
		s.history = s.history[len(s.history)-maxHistory:]
	}
	for w := range s.watchers {
		if !w.send(ev) {
			delete(s.watchers, w)
		}
	}
	return deepCopy(obj)
}

// modify stores next over cur, as every write of an existing object ends:
// the server's own metadata is kept, the generation is bumped when the
// object changed outside metadata (and outside status, for a resource with
// a status subresource), and a deleted object whose last finalizer went is
// removed. s.mu is held.
func (s *Server) modify(r Resource, ns, name string, cur, next map[string]any) map[string]any {
	cm, nm := metaOf(cur), metaOf(next)
	for _, f := range []string{"name", "namespace", "uid", "creationTimestamp", "generation",
		"deletionTimestamp", "deletionGracePeriodSeconds"} {
		if v, ok := cm[f]; ok {
			nm[f] = v
		} else {
			delete(nm, f)
		}
	}
	if specChanged(r, cur, next) {
		gen, _ := toInt64(cm["generation"])
		nm["generation"] = gen + 1
	}
	if _, deleting := nm["deletionTimestamp"]; deleting && len(finalizers(nm)) == 0 {
		return s.store(r, ns, name, next, "DELETED")
	}
	return s.store(r, ns, name, next, "MODIFIED")
}

// specChanged reports whether an update changed what bumps the
// generation: everything but metadata and, with a status subresource,
// status.
func specChanged(r Resource, cur, next map[string]any) bool {
	strip := func(o map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range o {
			if k == "metadata" || k == "apiVersion" || k == "kind" || (r.Status && k == "status") {
				continue
			}
			out[k] = v
		}
		return out
	}
	return !reflect.DeepEqual(strip(cur), strip(next))
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

func finalizers(meta map[string]any) []any {
	f, _ := meta["finalizers"].([]any)
	return f
}

// update replaces an object (or, for sub "status", its status).
func (s *Server) update(r Resource, ns, name, sub string, body []byte) (map[string]any, error) {
	obj, err := decode(body)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.objects[r.GVR][key(r, ns, name)]
	if cur == nil {
		return nil, apierrors.NewNotFound(r.GVR.GroupResource(), name)
	}
	if err := checkPreconditions(r, name, cur, metaOf(obj)); err != nil {
		return nil, err
	}
	return s.modify(r, ns, name, cur, replaced(r, sub, cur, obj)), nil
}

// replaced is cur with obj's content: its status only for sub "status";
// otherwise everything but the status (with a status subresource) and the
// server's metadata.
func replaced(r Resource, sub string, cur, obj map[string]any) map[string]any {
	next := deepCopy(cur)
	if sub == "status" {
		if st, ok := obj["status"]; ok {
			next["status"] = st
		} else {
			delete(next, "status")
		}
		return next
	}
	for k := range next {
		if k != "metadata" && !(r.Status && k == "status") {
			delete(next, k)
		}
	}
	for k, v := range obj {
		if k != "metadata" && !(r.Status && k == "status") {
			next[k] = v
		}
	}
	nm, om := metaOf(next), metaOf(obj)
	for _, f := range []string{"labels", "annotations", "ownerReferences", "finalizers"} {
		if v, ok := om[f]; ok {
			nm[f] = v
		} else {
			delete(nm, f)
		}
	}
	return next
}

func checkPreconditions(r Resource, name string, cur, meta map[string]any) error {
	if rv, _ := meta["resourceVersion"].(string); rv != "" && rv != metaOf(cur)["resourceVersion"] {
		return apierrors.NewConflict(r.GVR.GroupResource(), name,
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if uid, _ := meta["uid"].(string); uid != "" && uid != metaOf(cur)["uid"] {
		return apierrors.NewConflict(r.GVR.GroupResource(), name,
			fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %v", uid, metaOf(cur)["uid"]))
	}
	return nil
}

// patch applies a JSON merge patch, a strategic merge patch (as a merge
// patch: lists are replaced, not merged by key) or a server-side apply
// patch (as a merge patch that creates the object when it is missing;
// fieldManager is required, ownership of fields is not tracked).
func (s *Server) patch(r Resource, ns, name, sub, contentType, fieldManager string, body []byte) (map[string]any, error) {
	apply := false
	switch {
	case strings.HasPrefix(contentType, "application/merge-patch+json"),
		strings.HasPrefix(contentType, "application/strategic-merge-patch+json"):
	case strings.HasPrefix(contentType, "application/apply-patch+yaml"),
		strings.HasPrefix(contentType, "application/apply-patch+json"):
		apply = true
		if fieldManager == "" {
			return nil, apierrors.NewBadRequest("PATCH with Content-Type application/apply-patch+yaml requires fieldManager")
		}
		var err error
		if body, err = yaml.YAMLToJSON(body); err != nil {
			return nil, apierrors.NewBadRequest("the apply patch is not YAML or JSON: " + err.Error())
		}
	default:
		return nil, unsupportedMediaType(contentType)
	}
	p, err := decode(body)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.objects[r.GVR][key(r, ns, name)]
	if cur == nil {
		if apply && sub == "" {
			metaOf(p)["name"] = name
			return s.createLocked(r, ns, p)
		}
		return nil, apierrors.NewNotFound(r.GVR.GroupResource(), name)
	}
	if pm, ok := p["metadata"].(map[string]any); ok {
		if err := checkPreconditions(r, name, cur, pm); err != nil {
			return nil, err
		}
		delete(pm, "resourceVersion") // a precondition, not a change
		delete(pm, "uid")
	}
	merged := mergePatch(deepCopy(cur), p).(map[string]any)
	switch {
	case sub == "status":
		st := merged["status"]
		merged = deepCopy(cur)
		merged["status"] = st
	case r.Status:
		merged["status"] = cur["status"]
	}
	return s.modify(r, ns, name, cur, merged), nil
}

// mergePatch applies an RFC 7386 merge patch.
func mergePatch(doc, patch any) any {
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
		dm[k] = mergePatch(dm[k], v)
	}
	return dm
}

// delete removes an object, honouring DeleteOptions' preconditions; an
// object with finalizers is only marked (deletionTimestamp) and goes when
// its last finalizer is removed.
func (s *Server) delete(r Resource, ns, name string, body []byte) (map[string]any, error) {
	var opts metav1.DeleteOptions
	if len(body) > 0 {
		if err := json.Unmarshal(body, &opts); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.objects[r.GVR][key(r, ns, name)]
	if cur == nil {
		return nil, apierrors.NewNotFound(r.GVR.GroupResource(), name)
	}
	if pre := opts.Preconditions; pre != nil {
		meta := map[string]any{}
		if pre.ResourceVersion != nil {
			meta["resourceVersion"] = *pre.ResourceVersion
		}
		if pre.UID != nil {
			meta["uid"] = string(*pre.UID)
		}
		if err := checkPreconditions(r, name, cur, meta); err != nil {
			return nil, err
		}
	}
	if len(finalizers(metaOf(cur))) > 0 {
		if _, deleting := metaOf(cur)["deletionTimestamp"]; deleting {
			return deepCopy(cur), nil
		}
		next := deepCopy(cur)
		metaOf(next)["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
		metaOf(next)["deletionGracePeriodSeconds"] = int64(0)
		return s.store(r, ns, name, next, "MODIFIED"), nil
	}
	return s.store(r, ns, name, deepCopy(cur), "DELETED"), nil
}
