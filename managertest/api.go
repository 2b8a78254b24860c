package managertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/go-logr/logr/testr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/fakeapi"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
)

// API is the in-memory API server of a Harness made with NewAPI. Every
// client of the Manager under test (typed, dynamic, metadata, a generated
// clientset made from Config) reaches it over HTTP, in-process, so they
// share one object store, and it behaves like the API server where
// controllers depend on it:
//   - resourceVersions increase with every write; an update or delete with
//     a stale resourceVersion or UID is a 409 Conflict;
//   - a resource with a status subresource (Serve's default) keeps status
//     and spec apart: an update of the object leaves status as stored, an
//     update of .../status changes only status;
//   - metadata.generation starts at 1 and is bumped by changes outside
//     metadata and status;
//   - a delete of an object with finalizers marks it (deletionTimestamp);
//     it goes when its last finalizer is removed;
//   - server-side apply creates or merges (fieldManager required), JSON
//     merge and strategic merge patches merge (lists are replaced);
//   - watches resume from a resourceVersion, stream their initial lists,
//     and metadata clients get PartialObjectMetadata.
//
// What it does not do: admission, validation against a schema, defaulting,
// field ownership of server-side apply, garbage collection of owned
// objects (testenv has a real API server, and the built-in garbage
// collector runs there), authentication and authorization. Requests are
// JSON only; the Manager is built so.
type API struct {
	s   *fakeapi.Server
	cfg *rest.Config
}

// NewAPI returns a Harness whose Manager runs over an in-memory API server
// (Harness.API) instead of fake clientsets: custom resources are served
// (API.Serve), and objects are seeded from objects (typed objects of a
// resource API.Serve or the defaults serve, or *unstructured.Unstructured).
// Harness.Client and Harness.Metadata stay nil: use API.Kube, API.Dynamic
// or clients made from API.Config.
func NewAPI(t testing.TB, component string, ds []descriptor.Descriptor, objects ...runtime.Object) *Harness {
	t.Helper()
	s := fakeapi.New()
	api := &API{s: s, cfg: fakeapi.Config(s, nil)}
	h := &Harness{
		T:       t,
		API:     api,
		Builder: manager.NewBuilder(component).Register(ds...).WithLogger(testr.NewWithInterface(t, testr.Options{})),
		Options: manager.Options{Serving: serving.Options{SecurePort: serving.PortDisabled}},
		Timeout: DefaultTimeout,
	}
	for _, obj := range objects {
		if err := api.Create(obj); err != nil {
			t.Fatalf("managertest: seeding %T: %v", obj, err)
		}
	}
	return h
}

// ResourceOption changes how API.Serve serves a resource: ClusterScoped,
// WithoutStatus.
type ResourceOption struct{ apply func(*fakeapi.Resource) }

// ClusterScoped makes the resource cluster-scoped (default: namespaced).
func ClusterScoped() ResourceOption {
	return ResourceOption{func(r *fakeapi.Resource) { r.Namespaced = false }}
}

// WithoutStatus serves the resource without a status subresource (default:
// with one, as most CustomResourceDefinitions declare).
func WithoutStatus() ResourceOption {
	return ResourceOption{func(r *fakeapi.Resource) { r.Status = false }}
}

// Serve serves gvr, objects of kind, from now on, as the API server does
// once a CustomResourceDefinition is established: namespaced, with a
// status subresource, unless opts say otherwise.
func (a *API) Serve(gvr schema.GroupVersionResource, kind string, opts ...ResourceOption) {
	r := fakeapi.Resource{GVR: gvr, Kind: kind, Namespaced: true, Status: true}
	for _, o := range opts {
		if o.apply != nil {
			o.apply(&r)
		}
	}
	a.s.AddResource(r)
}

// Remove stops serving gvr, as when its CustomResourceDefinition is
// deleted: its objects are gone and its watches end.
func (a *API) Remove(gvr schema.GroupVersionResource) { a.s.RemoveResource(gvr) }

// Config returns a REST config that reaches the server (JSON).
func (a *API) Config() *rest.Config { return rest.CopyConfig(a.cfg) }

// Kube returns a typed clientset of the server.
func (a *API) Kube() kubernetes.Interface { return kubernetes.NewForConfigOrDie(a.Config()) }

// Dynamic returns a dynamic client of the server.
func (a *API) Dynamic() dynamic.Interface { return dynamic.NewForConfigOrDie(a.Config()) }

// Create stores obj as it is, bypassing the request path; for fixtures.
// Its resource is found by its apiVersion and kind among those served.
func (a *API) Create(obj runtime.Object) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	_ = json.Unmarshal(data, &tm)
	if tm.Kind == "" {
		gvk, err := kindOf(obj)
		if err != nil {
			return err
		}
		tm.APIVersion, tm.Kind = gvk.GroupVersion().String(), gvk.Kind
		var m map[string]any
		_ = json.Unmarshal(data, &m)
		m["apiVersion"], m["kind"] = tm.APIVersion, tm.Kind
		data, _ = json.Marshal(m)
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return err
	}
	gvr, ok := a.s.ResourceFor(gv.WithKind(tm.Kind))
	if !ok {
		return fmt.Errorf("managertest: no served resource has kind %s %s; API.Serve it first", tm.APIVersion, tm.Kind)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	return a.s.Create(gvr, m)
}

// kindOf finds a typed object's kind in client-go's scheme.
func kindOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("managertest: %T has no apiVersion and kind; set its TypeMeta", obj)
	}
	return gvks[0], nil
}

// Get returns a stored object, as unstructured, or nil.
func (a *API) Get(gvr schema.GroupVersionResource, namespace, name string) *unstructured.Unstructured {
	o := a.s.Get(gvr, namespace, name)
	if o == nil {
		return nil
	}
	return toUnstructured(o)
}

// toUnstructured decodes a stored object as a client would: whole numbers
// as int64.
func toUnstructured(o map[string]any) *unstructured.Unstructured {
	data, err := json.Marshal(o)
	u := &unstructured.Unstructured{}
	if err == nil {
		err = u.UnmarshalJSON(data)
	}
	if err != nil {
		return &unstructured.Unstructured{Object: o}
	}
	return u
}

// List returns the stored objects of gvr in namespace ("" for all), in
// name order.
func (a *API) List(gvr schema.GroupVersionResource, namespace string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range a.s.List(gvr, namespace) {
		out = append(out, toUnstructured(o))
	}
	return out
}

// Request is a request as Refuse sees it.
type Request struct {
	Verb        string // get, list, watch, create, update, patch, delete
	Resource    schema.GroupVersionResource
	Subresource string
	Namespace   string
	Name        string
	UserAgent   string // "<component>/<controller>" for a controller's client
}

// Refuse makes the server answer every request f returns an error for with
// that error (an apierrors status, such as NewConflict or
// NewServiceUnavailable, is answered as the API server would), for fault
// injection. A nil f refuses nothing.
func (a *API) Refuse(f func(Request) error) {
	if f == nil {
		a.s.SetHook(nil)
		return
	}
	a.s.SetHook(func(_ http.ResponseWriter, r *fakeapi.Request) error {
		err := f(Request{Verb: r.Verb, Resource: r.Resource.GVR, Subresource: r.Subresource,
			Namespace: r.Namespace, Name: r.Name, UserAgent: r.UserAgent})
		if err == nil {
			return nil
		}
		if _, ok := err.(apierrors.APIStatus); ok {
			return err
		}
		return apierrors.NewInternalError(fmt.Errorf("managertest: refused: %w", err))
	})
}
