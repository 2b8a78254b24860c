package fakeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Request is what Hook is told of a request before the server acts on it.
type Request struct {
	Verb        string // get, list, watch, create, update, patch, delete
	Resource    Resource
	Subresource string
	Namespace   string
	Name        string // for create: the name in the body, if any
	UserAgent   string
	Header      http.Header
	Body        []byte // create, update, patch
	Time        time.Time
	// Context ends when the client gives up on the request.
	Context context.Context
}

// Mutating reports whether the request writes.
func (r *Request) Mutating() bool {
	switch r.Verb {
	case "get", "list", "watch":
		return false
	}
	return true
}

// Hook is called for every request of a served resource. A nil error lets
// the server act; an error that is an apierrors.APIStatus is answered as
// that status, any other error as a 500. A Hook may also answer the
// request itself by returning ErrAnswered with the object it wrote to w.
type Hook func(w http.ResponseWriter, r *Request) error

// ErrAnswered is returned by a Hook that wrote the response itself.
var ErrAnswered = errors.New("fakeapi: answered by the hook")

// Server is the in-memory API server. Create it with New.
type Server struct {
	resources map[schema.GroupVersionResource]Resource
	byPath    map[string]Resource // "group/version/resource"

	mu       sync.Mutex
	rv       int64
	objects  map[schema.GroupVersionResource]map[string]map[string]any // by "ns/name"
	history  []event
	oldest   int64 // the oldest resourceVersion a watch may start after
	watchers map[*watcher]struct{}
	hook     Hook
	uid      int64
}

type event struct {
	rv   int64
	typ  string
	gvr  schema.GroupVersionResource
	ns   string
	name string
	obj  map[string]any
}

// maxHistory bounds the events kept for watches that resume.
const maxHistory = 10000

// New returns a server for resources (DefaultResources when none).
func New(resources ...Resource) *Server {
	if len(resources) == 0 {
		resources = DefaultResources()
	}
	s := &Server{
		resources: map[schema.GroupVersionResource]Resource{},
		byPath:    map[string]Resource{},
		objects:   map[schema.GroupVersionResource]map[string]map[string]any{},
		watchers:  map[*watcher]struct{}{},
		rv:        1,
	}
	for _, r := range resources {
		s.addLocked(r)
	}
	return s
}

func (s *Server) addLocked(r Resource) {
	s.resources[r.GVR] = r
	s.byPath[r.GVR.Group+"/"+r.GVR.Version+"/"+r.GVR.Resource] = r
	if s.objects[r.GVR] == nil {
		s.objects[r.GVR] = map[string]map[string]any{}
	}
}

// AddResource serves r from now on, as the API server does once a
// CustomResourceDefinition is established; objects it already holds (of
// an earlier AddResource) stay. Discovery lists it.
func (s *Server) AddResource(r Resource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(r)
}

// RemoveResource stops serving gvr, as the API server does when a
// CustomResourceDefinition is deleted: its objects are gone, its open
// watches end, and discovery no longer lists it.
func (s *Server) RemoveResource(gvr schema.GroupVersionResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.resources[gvr]
	if !ok {
		return
	}
	delete(s.resources, gvr)
	delete(s.byPath, gvr.Group+"/"+gvr.Version+"/"+gvr.Resource)
	delete(s.objects, gvr)
	for w := range s.watchers {
		if w.gvr == r.GVR {
			w.close()
			delete(s.watchers, w)
		}
	}
}

// ResourceFor returns the served resource whose objects are of gvk.
func (s *Server) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	_, resources := s.lookup()
	for gvr, r := range resources {
		if r.GVK() == gvk {
			return gvr, true
		}
	}
	return schema.GroupVersionResource{}, false
}

// lookup returns the resource path maps, read under the lock.
func (s *Server) lookup() (byPath map[string]Resource, resources map[schema.GroupVersionResource]Resource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.byPath), maps.Clone(s.resources)
}

// SetHook installs h (nil: none). It applies to requests that arrive after.
func (s *Server) SetHook(h Hook) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = h
}

// ResourceVersion is the newest resourceVersion.
func (s *Server) ResourceVersion() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv
}

// DropWatches ends every open watch and forgets the event history, as an
// API server restart does: clients that resume from an older
// resourceVersion are told 410 Gone and list again.
func (s *Server) DropWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		w.close()
		delete(s.watchers, w)
	}
	s.history = nil
	s.oldest = s.rv
}

// Get returns a copy of a stored object as JSON-shaped data, or nil.
func (s *Server) Get(gvr schema.GroupVersionResource, namespace, name string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[gvr][namespace+"/"+name]
	if o == nil {
		return nil
	}
	return deepCopy(o)
}

// List returns copies of the stored objects of gvr in namespace ("" for
// all), in name order.
func (s *Server) List(gvr schema.GroupVersionResource, namespace string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked(gvr, namespace, nil)
}

// Create stores obj (typed or JSON-shaped) as a client's create would,
// bypassing Hook; for test fixtures.
func (s *Server) Create(gvr schema.GroupVersionResource, obj any) error {
	_, resources := s.lookup()
	r, ok := resources[gvr]
	if !ok {
		return fmt.Errorf("fakeapi: %v is not served", gvr)
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	ns, _ := nestedString(mustMap(body), "metadata", "namespace")
	_, err = s.create(r, ns, body)
	return err
}

func mustMap(b []byte) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if s.discovery(w, req) {
		return
	}
	byPath, _ := s.lookup()
	p, err := parsePath(req.URL.Path, byPath)
	if err != nil {
		writeStatus(w, err)
		return
	}
	r := &Request{
		Resource: p.res, Subresource: p.sub, Namespace: p.ns, Name: p.name,
		UserAgent: req.UserAgent(), Header: req.Header, Time: time.Now(), Context: req.Context(),
	}
	q := req.URL.Query()
	switch req.Method {
	case http.MethodGet:
		switch {
		case p.name != "":
			r.Verb = "get"
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			r.Verb = "watch"
		default:
			r.Verb = "list"
		}
	case http.MethodPost:
		r.Verb = "create"
	case http.MethodPut:
		r.Verb = "update"
	case http.MethodPatch:
		r.Verb = "patch"
	case http.MethodDelete:
		r.Verb = "delete"
		if p.name == "" {
			r.Verb = "deletecollection"
		}
	default:
		writeStatus(w, apierrors.NewMethodNotSupported(p.res.GVR.GroupResource(), req.Method))
		return
	}
	if req.Body != nil {
		if r.Body, err = io.ReadAll(req.Body); err != nil {
			writeStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
	}
	if r.Mutating() && len(r.Body) > 0 {
		if ct := req.Header.Get("Content-Type"); ct != "" && !strings.Contains(ct, "json") &&
			!strings.HasPrefix(ct, "application/apply-patch+yaml") {
			writeStatus(w, unsupportedMediaType(ct))
			return
		}
	}
	if r.Verb == "create" && r.Name == "" && p.sub == "" {
		r.Name, _ = nestedString(mustMap(r.Body), "metadata", "name")
	}
	s.mu.Lock()
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		if err := hook(w, r); err != nil {
			if errors.Is(err, ErrAnswered) {
				return
			}
			writeStatus(w, err)
			return
		}
	}
	if p.sub != "" && !(p.sub == "status" && p.res.Status) {
		writeStatus(w, apierrors.NewNotFound(p.res.GVR.GroupResource(), p.name+"/"+p.sub))
		return
	}
	s.serve(w, req, r, q)
}

func (s *Server) serve(w http.ResponseWriter, req *http.Request, r *Request, q map[string][]string) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	var out map[string]any
	var err error
	switch r.Verb {
	case "get":
		out, err = s.get(r.Resource, r.Namespace, r.Name)
	case "list":
		var sel *selector
		if sel, err = parseSelector(get("labelSelector"), get("fieldSelector")); err == nil {
			out = s.list(r.Resource, r.Namespace, sel)
		}
	case "watch":
		s.watch(w, req, r, get)
		return
	case "create":
		out, err = s.create(r.Resource, r.Namespace, r.Body)
	case "update":
		out, err = s.update(r.Resource, r.Namespace, r.Name, r.Subresource, r.Body)
	case "patch":
		out, err = s.patch(r.Resource, r.Namespace, r.Name, r.Subresource, req.Header.Get("Content-Type"),
			get("fieldManager"), r.Body)
	case "delete":
		out, err = s.delete(r.Resource, r.Namespace, r.Name, r.Body)
	default:
		err = apierrors.NewMethodNotSupported(r.Resource.GVR.GroupResource(), r.Verb)
	}
	if err != nil {
		writeStatus(w, err)
		return
	}
	code := http.StatusOK
	if r.Verb == "create" {
		code = http.StatusCreated
	}
	if asMetadata(req) {
		out = partialMetadata(out)
	}
	writeJSON(w, code, out)
}

// asMetadata reports whether the client asked for PartialObjectMetadata
// (a metadata client).
func asMetadata(req *http.Request) bool {
	return strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata")
}

// partialMetadata turns an object, or a list of them, into what the API
// server answers a metadata client.
func partialMetadata(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	if items, ok := obj["items"].([]any); ok {
		out := make([]any, len(items))
		for i, it := range items {
			m, _ := it.(map[string]any)
			out[i] = partialMetadata(m)
		}
		return map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
			"metadata": obj["metadata"], "items": out}
	}
	return map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": obj["metadata"]}
}

func (s *Server) get(r Resource, ns, name string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[r.GVR][key(r, ns, name)]
	if o == nil {
		return nil, apierrors.NewNotFound(r.GVR.GroupResource(), name)
	}
	return deepCopy(o), nil
}

func key(r Resource, ns, name string) string {
	if !r.Namespaced {
		ns = ""
	}
	return ns + "/" + name
}

func (s *Server) listLocked(gvr schema.GroupVersionResource, ns string, sel *selector) []map[string]any {
	r := s.resources[gvr]
	if s.objects[gvr] == nil {
		return nil
	}
	var keys []string
	for k, o := range s.objects[gvr] {
		if r.Namespaced && ns != "" && !strings.HasPrefix(k, ns+"/") {
			continue
		}
		if sel.matches(o) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]map[string]any, 0, len(keys))
	for _, k := range keys {
		out = append(out, deepCopy(s.objects[gvr][k]))
	}
	return out
}

func (s *Server) list(r Resource, ns string, sel *selector) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := s.listLocked(r.GVR, ns, sel)
	anyItems := make([]any, len(items))
	for i, it := range items {
		anyItems[i] = it
	}
	return map[string]any{
		"apiVersion": r.GVR.GroupVersion().String(),
		"kind":       r.Kind + "List",
		"metadata":   map[string]any{"resourceVersion": strconv.FormatInt(s.rv, 10)},
		"items":      anyItems,
	}
}

func decode(body []byte) (map[string]any, error) {
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, apierrors.NewBadRequest("the body is not a JSON object: " + err.Error())
	}
	return obj, nil
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
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok
}

func deepCopy(m map[string]any) map[string]any {
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

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeStatus answers err as the API server does.
func writeStatus(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	status.Status = metav1.StatusFailure
	code := int(status.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, status)
}

// unsupportedMediaType is the API server's 415.
func unsupportedMediaType(ct string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format: %s (fakeapi serves JSON only)", ct),
	}}
}

// requestContext is the context of a request the handler serves.
func requestContext(req *http.Request) context.Context { return req.Context() }
