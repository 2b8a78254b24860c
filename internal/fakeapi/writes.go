package fakeapi

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// create stores a new object from body.
func (s *Server) create(r Resource, ns string, body []byte, opts options) (map[string]any, error) {
	obj, err := decode(body)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createLocked(r, ns, obj, opts)
}

// createLocked stores obj as a new object. s.mu is held.
func (s *Server) createLocked(
	r Resource,
	ns string,
	obj map[string]any,
	opts options,
) (map[string]any, error) {
	if s.objects[r.GVR] == nil {
		return nil, apierrors.NewNotFound(r.GVR.GroupResource(), "")
	}
	meta := metaOf(obj)
	name, _ := meta["name"].(string)
	if name == "" {
		if gen, _ := meta["generateName"].(string); gen != "" {
			name = gen + s.suffix()
		}
	}
	if name == "" {
		return nil, apierrors.NewBadRequest("metadata.name or metadata.generateName is required")
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 && r.GVR.Resource != "events" {
		return nil, apierrors.NewInvalid(r.GVK().GroupKind(), name, field.ErrorList{
			field.Invalid(field.NewPath("metadata", "name"), name, msgs[0])})
	}
	if r.Namespaced {
		if bodyNS, _ := meta["namespace"].(string); bodyNS != "" && ns != "" && bodyNS != ns {
			return nil, apierrors.NewBadRequest(
				"the namespace of the object does not match the namespace of the request",
			)
		} else if ns == "" {
			ns = bodyNS
		}
		if ns == "" {
			return nil, apierrors.NewBadRequest("a namespace is required")
		}
		meta["namespace"] = ns
		if err := s.admitLocked(r, ns, name); err != nil {
			return nil, err
		}
	} else {
		delete(meta, "namespace")
	}
	meta["name"] = name
	k := key(r, ns, name)
	if s.objects[r.GVR][k] != nil {
		return nil, apierrors.NewAlreadyExists(r.GVR.GroupResource(), name)
	}
	s.prepareCreate(r, obj, opts.fixture)
	if !opts.fixture && !opts.applied {
		obj = s.managers.update(r, "", nil, obj, opts.manager())
	}
	if opts.dryRun {
		obj["apiVersion"], obj["kind"] = r.GVR.GroupVersion().String(), r.Kind
		return obj, nil
	}
	return s.store(r, ns, name, obj, nil, "ADDED"), nil
}

// suffix is five characters for a generated name.
func (s *Server) suffix() string {
	s.uid++
	return fmt.Sprintf("%05x", s.uid%(1<<20))
}

// prepareCreate sets what the server sets on a new object: identity,
// generation, and (unless a fixture set them) no deletion and no status
// for a resource with a status subresource.
func (s *Server) prepareCreate(r Resource, obj map[string]any, fixture bool) {
	meta := metaOf(obj)
	keep := func(f string) bool {
		_, ok := meta[f]
		return fixture && ok
	}
	if !keep("uid") {
		s.uid++
		meta["uid"] = fmt.Sprintf("00000000-0000-0000-0000-%012x", s.uid)
	}
	if !keep("creationTimestamp") || meta["creationTimestamp"] == nil {
		meta["creationTimestamp"] = timestamp(time.Now())
	}
	switch {
	case keep("generation"):
	case r.strategy().generation != nil:
		meta["generation"] = int64(1)
	default:
		delete(meta, "generation")
	}
	if !keep("deletionTimestamp") {
		delete(meta, "deletionTimestamp")
		delete(meta, "deletionGracePeriodSeconds")
	}
	delete(meta, "resourceVersion")
	if r.Status && !(fixture && obj["status"] != nil) {
		delete(obj, "status")
	}
	switch {
	case r.isNamespaces():
		spec, _ := obj["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
			obj["spec"] = spec
		}
		if fins, _ := spec["finalizers"].([]any); len(fins) == 0 {
			spec["finalizers"] = []any{"kubernetes"}
		}
		if obj["status"] == nil {
			obj["status"] = map[string]any{"phase": "Active"}
		}
	case r.BuiltIn && r.GVR.Resource == "pods" && r.GVR.Group == "" && obj["status"] == nil:
		obj["status"] = map[string]any{"phase": "Pending"}
	}
}

// admitLocked refuses a create in a namespace being deleted, as the
// NamespaceLifecycle admission plugin does.
func (s *Server) admitLocked(r Resource, ns, name string) error {
	nsObj := s.objects[schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}]["/"+ns]
	if nsObj == nil {
		return nil
	}
	if phase, _ := nestedString(nsObj, "status", "phase"); phase != "Terminating" {
		return nil
	}
	return apierrors.NewForbidden(r.GVR.GroupResource(), name, fmt.Errorf(
		"unable to create new content in namespace %s because it is being terminated", ns))
}

// store sets the object's identity fields and resourceVersion, stores it
// (or, for DELETED, removes it) and tells the watchers; prev is the state
// a MODIFIED event replaces. s.mu is held.
func (s *Server) store(
	r Resource,
	ns, name string,
	obj, prev map[string]any,
	typ string,
) map[string]any {
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
	if typ == "MODIFIED" {
		ev.prev = deepCopy(prev)
	}
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

// commit ends every write of an existing object: next replaces cur,
// unless nothing changed (then nothing is written and the resourceVersion
// stays, as the API server skips a no-op write); an object being deleted
// whose last finalizer went is removed. A dry run answers what would be
// stored. s.mu is held.
func (s *Server) commit(
	r Resource,
	ns, name string,
	cur, next map[string]any,
	dryRun bool,
) map[string]any {
	next["apiVersion"], next["kind"] = cur["apiVersion"], cur["kind"]
	metaOf(next)["resourceVersion"] = metaOf(cur)["resourceVersion"]
	grace, _ := toInt64(metaOf(cur)["deletionGracePeriodSeconds"])
	gone := deleting(cur) && len(finalizers(metaOf(next))) == 0 && grace == 0 &&
		!(r.isNamespaces() && namespaceFinalizing(next))
	switch {
	case reflect.DeepEqual(cur, next):
		return deepCopy(cur)
	case dryRun:
		return next
	case gone:
		return s.store(r, ns, name, next, nil, "DELETED")
	}
	return s.store(r, ns, name, next, cur, "MODIFIED")
}

// namespaceFinalizing reports whether a namespace still has
// spec.finalizers, which keep it after its metadata.finalizers are done.
func namespaceFinalizing(ns map[string]any) bool {
	fins, _ := nested(ns, "spec", "finalizers")
	list, _ := fins.([]any)
	return len(list) > 0
}

// prepareUpdate carries the server's metadata over from cur to next and
// bumps the generation by r's rule.
func prepareUpdate(r Resource, cur, next map[string]any) {
	cm, nm := metaOf(cur), metaOf(next)
	for _, f := range []string{"name", "namespace", "uid", "creationTimestamp", "generation",
		"deletionTimestamp", "deletionGracePeriodSeconds"} {
		if v, ok := cm[f]; ok {
			nm[f] = v
		} else {
			delete(nm, f)
		}
	}
	if rule := r.strategy().generation; rule != nil && rule(r, cur, next) {
		gen, _ := toInt64(cm["generation"])
		nm["generation"] = gen + 1
	}
}

// validateUpdate refuses what the API server's validation of any update
// refuses: new finalizers on an object being deleted.
func validateUpdate(r Resource, name string, cur, next map[string]any) error {
	if !deleting(cur) {
		return nil
	}
	if added := newFinalizers(cur, next); len(added) > 0 {
		return apierrors.NewInvalid(r.GVK().GroupKind(), name, field.ErrorList{field.Forbidden(
			field.NewPath("metadata", "finalizers"), fmt.Sprintf("no new finalizers can be "+
				"added if the object is being deleted, found new finalizers %q", added))})
	}
	return nil
}

// update replaces an object (or, for sub "status", its status; for a
// namespace's "finalize", its spec.finalizers).
func (s *Server) update(
	r Resource,
	ns, name, sub string,
	body []byte,
	opts options,
) (map[string]any, error) {
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
	rv, _ := metaOf(obj)["resourceVersion"].(string)
	if rv == "" && r.strategy().conditional {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: r.GVR.Group, Kind: r.GVR.Resource},
			name, field.ErrorList{field.Invalid(field.NewPath("metadata", "resourceVersion"), 0,
				"must be specified for an update")})
	}
	if err := checkPreconditions(r, name, cur, metaOf(obj)); err != nil {
		return nil, err
	}
	next := replaced(r, sub, cur, obj)
	prepareUpdate(r, cur, next)
	if err := validateUpdate(r, name, cur, next); err != nil {
		return nil, err
	}
	next = s.managers.update(r, sub, cur, next, opts.manager())
	return s.commit(r, ns, name, cur, next, opts.dryRun), nil
}

// replaced is cur with obj's content: its status only for sub "status"
// (and, for a custom resource, nothing else: the API server copies the
// rest from the stored object); spec.finalizers only for a namespace's
// "finalize"; otherwise everything but the status (with a status
// subresource) and the server's metadata.
func replaced(r Resource, sub string, cur, obj map[string]any) map[string]any {
	next := deepCopy(cur)
	switch sub {
	case "status":
		if st, ok := obj["status"]; ok {
			next["status"] = st
		} else {
			delete(next, "status")
		}
		return next
	case "finalize":
		fins, _ := nested(obj, "spec", "finalizers")
		spec, _ := next["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
			next["spec"] = spec
		}
		spec["finalizers"] = fins
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
	for _, f := range []string{"labels", "annotations", "ownerReferences", "finalizers",
		"managedFields"} {
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
		return apierrors.NewConflict(
			r.GVR.GroupResource(),
			name,
			errors.New(
				"the object has been modified; please apply your changes to the latest "+
					"version and try again",
			),
		)
	}
	if uid, _ := meta["uid"].(string); uid != "" && uid != metaOf(cur)["uid"] {
		return apierrors.NewConflict(
			r.GVR.GroupResource(),
			name,
			fmt.Errorf(
				"Precondition failed: UID in precondition: %s, UID in object meta: %v",
				uid,
				metaOf(cur)["uid"],
			),
		)
	}
	return nil
}
