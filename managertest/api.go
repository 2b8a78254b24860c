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
// share one object store, and it behaves like kube-apiserver where
// controllers depend on it: every row of the contract table in
// docs/testing.md ("What each test double models") holds here as it does
// on kube-apiserver, or is answered with an error naming what is not
// modelled. Among them:
//   - resourceVersions increase with every write, and a write that changes
//     nothing (an update, a patch, a server-side apply) writes nothing: the
//     resourceVersion stays and watchers get no event; a stale
//     resourceVersion or UID is a 409 Conflict; an update of a custom
//     resource or a Lease without a resourceVersion is 422;
//   - a resource with a status subresource (Serve's default) keeps status
//     and spec apart;
//   - metadata.generation as kube-apiserver keeps it: 1 on create for a
//     custom resource, bumped by changes outside metadata (and status,
//     with a status subresource); the built-in resources' by their own
//     rules (a ConfigMap has none, a Deployment's annotations count);
//     bumped too when a delete is held by finalizers;
//   - deletion: finalizers hold an object (deletionTimestamp set) until
//     the last is removed, and none may be added meanwhile; DeleteOptions'
//     preconditions, propagationPolicy (the garbage collector's
//     finalizers), dryRun and a Pod's grace period are honoured;
//   - patches: JSON merge; strategic merge with the directives and merge
//     keys of a built-in type (415 for a custom resource); server-side
//     apply with field managers, conflicts (409 unless forced) and the
//     removal of fields a manager stops applying;
//   - lists and watches with label and field selectors (a watch sends
//     ADDED and DELETED as objects come to match and stop matching),
//     pagination, resumes from a resourceVersion, streamed initial lists
//     with their bookmark, and metadata clients get PartialObjectMetadata;
//   - namespaces are marked Terminating when deleted, and a create in one
//     is 403; ServiceAccounts' TokenRequests are answered.
//
// What it does not do: admission beyond that, validation against a
// schema, defaulting, garbage collection of owned objects (testenv has a
// real API server, and the built-in garbage collector runs there),
// authentication and authorization, JSON patches, lists as of a past
// resourceVersion; objects may be created in namespaces that do not
// exist. Requests are JSON only; the Manager is built so.
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
func NewAPI(
	t testing.TB,
	component string,
	ds []descriptor.Descriptor,
	objects ...runtime.Object,
) *Harness {
	t.Helper()
	s := fakeapi.New()
	api := &API{s: s, cfg: fakeapi.Config(s, nil)}
	h := &Harness{
		T:   t,
		API: api,
		Builder: manager.NewBuilder(component).
			Register(ds...).
			WithLogger(testr.NewWithInterface(t, testr.Options{})),
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
// status subresource, unless opts say otherwise. A kind client-go's scheme
// knows (a built-in resource the defaults leave out, such as
// EndpointSlices) is served with its built-in rules (strategic merge
// patches, generation) instead of a custom resource's.
func (a *API) Serve(gvr schema.GroupVersionResource, kind string, opts ...ResourceOption) {
	r := fakeapi.CustomResource(gvr, kind, true, true)
	for _, o := range opts {
		if o.apply != nil {
			o.apply(&r)
		}
	}
	a.s.AddResource(r)
}

// Remove stops serving gvr, as when its CustomResourceDefinition is
// deleted: its objects are deleted (watchers get a DELETED event for each,
// so informers forget them), then its watches end.
func (a *API) Remove(gvr schema.GroupVersionResource) { a.s.RemoveResource(gvr) }

// Config returns a REST config that reaches the server (JSON).
func (a *API) Config() *rest.Config { return rest.CopyConfig(a.cfg) }

// Kube returns a typed clientset of the server.
func (a *API) Kube() kubernetes.Interface { return kubernetes.NewForConfigOrDie(a.Config()) }

// Dynamic returns a dynamic client of the server.
func (a *API) Dynamic() dynamic.Interface { return dynamic.NewForConfigOrDie(a.Config()) }

// Create stores obj as a fixture, bypassing the request path (and
// Refuse): as a client's create would, except that what obj sets of its
// UID, creationTimestamp, generation, deletionTimestamp and status is
// kept, so that a test may refer to a seeded object by its UID (in
// ownerReferences, say) or seed a status; the server fills in what obj
// leaves empty and sets the resourceVersion. (kube-apiserver assigns every
// created object a UID of its own: against testenv, read it back.) Its
// resource is found by its apiVersion and kind among those served.
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
		return fmt.Errorf(
			"managertest: no served resource has kind %s %s; API.Serve it first",
			tm.APIVersion,
			tm.Kind,
		)
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
		return schema.GroupVersionKind{}, fmt.Errorf(
			"managertest: %T has no apiVersion and kind; set its TypeMeta",
			obj,
		)
	}
	return gvks[0], nil
}

// Get returns a stored object, as unstructured, or nil.
func (a *API) Get(
	gvr schema.GroupVersionResource,
	namespace, name string,
) *unstructured.Unstructured {
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
