package fakeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
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
	Verb        string // get, list, watch, create, update, patch, delete, deletecollection
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

	mu        sync.Mutex
	rv        int64
	objects   map[schema.GroupVersionResource]map[string]map[string]any // by "ns/name"
	history   []event
	oldest    int64 // the oldest resourceVersion a watch may start after
	watchers  map[*watcher]struct{}
	hook      Hook
	uid       int64
	continues continues
	managers  fieldManagers
}

type event struct {
	rv   int64
	typ  string
	gvr  schema.GroupVersionResource
	ns   string
	name string
	obj  map[string]any
	prev map[string]any // the state before a MODIFIED event
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
// CustomResourceDefinition is deleted: its objects are deleted (watchers
// get a DELETED event for each), then its open watches end, and discovery
// no longer lists it.
func (s *Server) RemoveResource(gvr schema.GroupVersionResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.resources[gvr]
	if !ok {
		return
	}
	for _, o := range s.listLocked(gvr, "", nil) {
		m := metaOf(o)
		ns, _ := m["namespace"].(string)
		name, _ := m["name"].(string)
		s.store(r, ns, name, o, nil, "DELETED")
	}
	delete(s.resources, gvr)
	delete(s.byPath, gvr.Group+"/"+gvr.Version+"/"+gvr.Resource)
	delete(s.objects, gvr)
	for w := range s.watchers {
		if w.gvr == r.GVR {
			w.end()
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
func (s *Server) lookup() (
	byPath map[string]Resource, resources map[schema.GroupVersionResource]Resource,
) {
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
	s.continues = continues{}
}

// Get returns a copy of a stored object as JSON-shaped data, or nil.
func (s *Server) Get(gvr schema.GroupVersionResource, namespace, name string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return deepCopy(s.objects[gvr][namespace+"/"+name])
}

// List returns copies of the stored objects of gvr in namespace ("" for
// all), in name order.
func (s *Server) List(gvr schema.GroupVersionResource, namespace string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked(gvr, namespace, nil)
}

// Create stores obj (typed or JSON-shaped) as a fixture, bypassing Hook:
// as a client's create would, except that what obj sets of uid,
// creationTimestamp, generation, deletionTimestamp and status is kept (a
// test may refer to a seeded object's uid, or seed a status); the server
// fills in what it leaves empty, and sets resourceVersion.
func (s *Server) Create(gvr schema.GroupVersionResource, obj any) error {
	_, resources := s.lookup()
	r, ok := resources[gvr]
	if !ok {
		return fmt.Errorf("fakeapi: %v is not served", gvr)
	}
	m, err := normalize(obj)
	if err != nil {
		return err
	}
	ns, _ := nestedString(m, "metadata", "namespace")
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = s.createLocked(r, ns, m, options{fieldManager: "fixture", fixture: true})
	return err
}

// options are a write's query parameters.
type options struct {
	dryRun       bool
	fieldManager string
	force        bool
	userAgent    string
	fixture      bool // Create's: keep the identity the object sets
	applied      bool // an apply's create: its managed fields are set
}

// manager is the field manager a write is recorded under: fieldManager,
// or the user agent's first part, as the API server does.
func (o options) manager() string {
	if o.fieldManager != "" {
		return o.fieldManager
	}
	m, _, _ := strings.Cut(o.userAgent, "/")
	return m
}

// parseOptions reads a write's query parameters.
func parseOptions(q url.Values, userAgent string) (options, error) {
	o := options{fieldManager: q.Get("fieldManager"), userAgent: userAgent}
	for _, d := range q["dryRun"] {
		if d != metav1.DryRunAll {
			return o, apierrors.NewBadRequest(fmt.Sprintf("dryRun: unsupported value %q, want %q",
				d, metav1.DryRunAll))
		}
		o.dryRun = true
	}
	if f := q.Get("force"); f != "" {
		force, err := strconv.ParseBool(f)
		if err != nil {
			return o, apierrors.NewBadRequest("force: " + err.Error())
		}
		o.force = force
	}
	return o, nil
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
	if p.sub != "" && !(p.sub == "status" && p.res.Status) && !s.servesSubresource(p) {
		writeStatus(w, apierrors.NewNotFound(p.res.GVR.GroupResource(), p.name+"/"+p.sub))
		return
	}
	s.serve(w, req, r, q)
}

// servesSubresource reports whether the server itself answers p's
// subresource, rather than Hook alone.
func (s *Server) servesSubresource(p path) bool {
	switch {
	case p.sub == "token" && p.res.GVR.Resource == "serviceaccounts" && p.res.GVR.Group == "":
		return true
	case p.sub == "finalize" && p.res.isNamespaces():
		return true
	}
	return false
}

func mustMap(b []byte) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func (s *Server) serve(w http.ResponseWriter, req *http.Request, r *Request, q url.Values) {
	var out map[string]any
	var err error
	code := http.StatusOK
	var opts options
	if r.Mutating() {
		if opts, err = parseOptions(q, r.UserAgent); err != nil {
			writeStatus(w, err)
			return
		}
	}
	switch r.Verb {
	case "get":
		out, err = s.get(r.Resource, r.Namespace, r.Name)
	case "list":
		out, err = s.list(r.Resource, r.Namespace, q)
	case "watch":
		s.watch(w, req, r, q)
		return
	case "create":
		code = http.StatusCreated
		if r.Subresource == "token" {
			out, err = s.token(r.Resource, r.Namespace, r.Name, r.Body)
			break
		}
		out, err = s.create(r.Resource, r.Namespace, r.Body, opts)
	case "update":
		out, err = s.update(r.Resource, r.Namespace, r.Name, r.Subresource, r.Body, opts)
	case "patch":
		out, err = s.patch(r.Resource, r.Namespace, r.Name, r.Subresource,
			req.Header.Get("Content-Type"), r.Body, opts)
	case "delete":
		out, err = s.delete(r.Resource, r.Namespace, r.Name, r.Body, q, opts)
	case "deletecollection":
		out, err = s.deleteCollection(r.Resource, r.Namespace, r.Body, q, opts)
	default:
		err = apierrors.NewMethodNotSupported(r.Resource.GVR.GroupResource(), r.Verb)
	}
	if err != nil {
		writeStatus(w, err)
		return
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
	if obj == nil || obj["kind"] == "Status" {
		return obj
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
	return map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
		"metadata": obj["metadata"]}
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

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeStatus answers err as the API server does.
func writeStatus(w http.ResponseWriter, err error) {
	status := statusOf(err)
	code := int(status.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, status)
}

// statusOf is the Status the API server answers err with.
func statusOf(err error) metav1.Status {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	status.Status = metav1.StatusFailure
	return status
}

// notSupported is the error the server answers a request it does not
// model with: what names it.
func notSupported(what string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusBadRequest,
		Reason: metav1.StatusReasonBadRequest,
		Message: "fakeapi: " + what + " (the in-memory API server does not model it; " +
			"testenv runs a real one)",
	}}
}

// unsupportedMediaType is the API server's 415.
func unsupportedMediaType(ct string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
		Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf(
			"the body of the request was in an unknown format: %s (fakeapi serves JSON only)",
			ct,
		),
	}}
}

// successStatus is what a delete that removed the object answers.
func successStatus() map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Status", "metadata": map[string]any{},
		"status": metav1.StatusSuccess}
}
