package namespace

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

var (
	configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")
	secrets    = corev1.SchemeGroupVersion.WithResource("secrets")
	// widgets can be listed and deleted one by one, not by collection.
	widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	// gadgets can only be deleted by name: never listed, so never found.
	gadgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
)

var namespacesResource = corev1.SchemeGroupVersion.WithResource("namespaces")

var allVerbs = metav1.Verbs{
	"create",
	"delete",
	"deletecollection",
	"get",
	"list",
	"patch",
	"update",
	"watch",
}

// resources is what the fake discovery answers by default.
func resources() []*metav1.APIResourceList {
	return []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "bindings", Namespaced: true, Verbs: metav1.Verbs{"create"}},
			{Name: "configmaps", Namespaced: true, Verbs: allVerbs},
			{Name: "pods", Namespaced: true, Verbs: allVerbs},
			{Name: "secrets", Namespaced: true, Verbs: allVerbs},
		}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "gadgets", Namespaced: true, Verbs: metav1.Verbs{"delete", "get"}},
			{Name: "widgets", Namespaced: true, Verbs: metav1.Verbs{"delete", "get", "list"}},
		}},
	}
}

// object is one object of the namespace's content.
type object struct {
	gvr  schema.GroupVersionResource
	meta metav1.PartialObjectMetadata
	// graceful objects stay, with a deletionTimestamp, after a delete (a
	// pod on a node within its grace period).
	graceful bool
}

func obj(gvr schema.GroupVersionResource, name string, finalizers ...string) object {
	return object{gvr: gvr, meta: metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, Finalizers: finalizers,
	}}}
}

// fakeMetadata is a metadata client over an in-memory store that deletes
// as the API server does (objects with finalizers, or graceful ones, get a
// deletionTimestamp and stay) and records each call, in order.
type fakeMetadata struct {
	mu      sync.Mutex
	objects []*object
	calls   []string
	// errs fails calls: the key is a call as recorded ("list widgets").
	errs  map[string]error
	clock *testingclock.FakeClock
}

func (f *fakeMetadata) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return &fakeResource{f: f, gvr: gvr}
}

// removeFinalizers clears name's finalizers, removing it if it was being
// deleted (what the finalizers' owner does).
func (f *fakeMetadata) removeFinalizers(gvr schema.GroupVersionResource, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects = slices.DeleteFunc(f.objects, func(o *object) bool {
		if o.gvr != gvr || o.meta.Name != name {
			return false
		}
		o.meta.Finalizers = nil
		return o.meta.DeletionTimestamp != nil
	})
}

func (f *fakeMetadata) left() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, o := range f.objects {
		out = append(out, o.gvr.Resource+"/"+o.meta.Name)
	}
	return out
}

type fakeResource struct {
	f         *fakeMetadata
	gvr       schema.GroupVersionResource
	namespace string
}

func (r *fakeResource) Namespace(ns string) metadata.ResourceInterface {
	cp := *r
	cp.namespace = ns
	return &cp
}

// call records one call and returns its injected error.
func (r *fakeResource) call(verb, name string) error {
	c := verb + " " + r.gvr.Resource
	if name != "" {
		c += "/" + name
	}
	r.f.calls = append(r.f.calls, c)
	return r.f.errs[c]
}

// deleteLocked deletes the stored objects match selects.
func (r *fakeResource) deleteLocked(match func(*object) bool) {
	now := metav1.NewTime(r.f.clock.Now())
	r.f.objects = slices.DeleteFunc(r.f.objects, func(o *object) bool {
		if !match(o) {
			return false
		}
		if len(o.meta.Finalizers) > 0 || o.graceful {
			if o.meta.DeletionTimestamp == nil {
				o.meta.DeletionTimestamp = &now
			}
			return false
		}
		return true
	})
}

func (r *fakeResource) mine(
	o *object,
) bool {
	return o.gvr == r.gvr && o.meta.Namespace == r.namespace
}

func checkBackground(o metav1.DeleteOptions) error {
	if o.PropagationPolicy == nil || *o.PropagationPolicy != metav1.DeletePropagationBackground {
		return fmt.Errorf("propagationPolicy %v, want Background", o.PropagationPolicy)
	}
	return nil
}

func (r *fakeResource) Delete(
	_ context.Context,
	name string,
	o metav1.DeleteOptions,
	_ ...string,
) error {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if err := r.call("delete", name); err != nil {
		return err
	}
	if err := checkBackground(o); err != nil {
		return err
	}
	found := false
	r.deleteLocked(func(o *object) bool {
		ok := r.mine(o) && o.meta.Name == name
		found = found || ok
		return ok
	})
	if !found {
		return apierrors.NewNotFound(r.gvr.GroupResource(), name)
	}
	return nil
}

func (r *fakeResource) DeleteCollection(
	_ context.Context,
	o metav1.DeleteOptions,
	_ metav1.ListOptions,
) error {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if err := r.call("deletecollection", ""); err != nil {
		return err
	}
	if err := checkBackground(o); err != nil {
		return err
	}
	r.deleteLocked(r.mine)
	return nil
}

func (r *fakeResource) List(
	context.Context,
	metav1.ListOptions,
) (*metav1.PartialObjectMetadataList, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if err := r.call("list", ""); err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{}
	for _, o := range r.f.objects {
		if r.mine(o) {
			out.Items = append(out.Items, *o.meta.DeepCopy())
		}
	}
	return out, nil
}

func (r *fakeResource) Get(
	context.Context,
	string,
	metav1.GetOptions,
	...string,
) (*metav1.PartialObjectMetadata, error) {
	return nil, apierrors.NewMethodNotSupported(r.gvr.GroupResource(), "get")
}

func (r *fakeResource) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, apierrors.NewMethodNotSupported(r.gvr.GroupResource(), "watch")
}

func (r *fakeResource) Patch(
	context.Context,
	string,
	types.PatchType,
	[]byte,
	metav1.PatchOptions,
	...string,
) (*metav1.PartialObjectMetadata, error) {
	return nil, apierrors.NewMethodNotSupported(r.gvr.GroupResource(), "patch")
}

// namespace returns namespace "ns", deleted deletedAgo before t0, with the
// kubernetes finalizer.
func namespace(deletedAgo time.Duration, opts ...func(*corev1.Namespace)) *corev1.Namespace {
	ts := metav1.NewTime(t0.Add(-deletedAgo))
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			Name:              "ns",
			UID:               "uid-ns",
			ResourceVersion:   "5",
			DeletionTimestamp: &ts,
		},
		Spec: corev1.NamespaceSpec{
			Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes},
		},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	for _, o := range opts {
		o(ns)
	}
	return ns
}

// pod is a pod object (also given to the typed client, where the grace
// period is estimated from) with a grace period of grace seconds.
func pod(name string, grace int64, graceful bool) object {
	o := obj(podsResource, name)
	o.graceful = graceful
	o.meta.Annotations = map[string]string{"grace": fmt.Sprint(grace)}
	return o
}

type fixture struct {
	client *fake.Clientset
	meta   *fakeMetadata
	clock  *testingclock.FakeClock
	d      *deleter
	// lists and discoverErr are what discovery answers.
	lists       []*metav1.APIResourceList
	discoverErr error
}

func newFixture(t *testing.T, ns *corev1.Namespace, objs ...object) *fixture {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	f := &fixture{
		clock: clk,
		meta:  &fakeMetadata{clock: clk, errs: map[string]error{}},
		lists: resources(),
	}
	var typed []*corev1.Pod
	for i := range objs {
		o := objs[i]
		f.meta.objects = append(f.meta.objects, &o)
		if o.gvr == podsResource {
			var grace int64
			fmt.Sscan(o.meta.Annotations["grace"], &grace)
			typed = append(
				typed,
				&corev1.Pod{
					ObjectMeta: o.meta.ObjectMeta,
					Spec:       corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(grace)},
				},
			)
		}
	}
	f.client = fake.NewClientset()
	if ns != nil {
		if err := f.client.Tracker().Add(ns.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range typed {
		if err := f.client.Tracker().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	// The finalize subresource sets spec.finalizers only. (The API server
	// would then remove a deleted namespace left without finalizers; here
	// it stays, so that tests can read its last conditions.)
	f.client.PrependReactor(
		"create",
		"namespaces",
		func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "finalize" {
				return false, nil, nil
			}
			in := a.(k8stesting.CreateActionImpl).GetObject().(*corev1.Namespace)
			stored, err := f.client.Tracker().Get(namespacesResource, "", in.Name)
			if err != nil {
				return true, nil, err
			}
			ns := stored.(*corev1.Namespace).DeepCopy()
			ns.Spec.Finalizers = in.Spec.Finalizers
			if err := f.client.Tracker().Update(namespacesResource, ns, ""); err != nil {
				return true, nil, err
			}
			return true, ns, nil
		},
	)
	f.d = newDeleter(
		f.client,
		f.meta,
		func() ([]*metav1.APIResourceList, error) { return f.lists, f.discoverErr },
		clk,
	)
	return f
}

// ns returns the namespace as the API has it, nil when gone.
func (f *fixture) ns(t *testing.T) *corev1.Namespace {
	t.Helper()
	ns, err := f.client.CoreV1().Namespaces().Get(t.Context(), "ns", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// finalizeCalls returns the spec.finalizers of every finalize call made.
func (f *fixture) finalizeCalls() [][]corev1.FinalizerName {
	var out [][]corev1.FinalizerName
	for _, a := range f.client.Actions() {
		if c, ok := a.(k8stesting.CreateActionImpl); ok && c.GetSubresource() == "finalize" {
			out = append(out, c.GetObject().(*corev1.Namespace).Spec.Finalizers)
		}
	}
	return out
}

// conditions renders the namespace's conditions as "Type Status Reason:
// Message", in order.
func conditions(ns *corev1.Namespace) []string {
	var out []string
	for _, c := range ns.Status.Conditions {
		out = append(out, fmt.Sprintf("%s %s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return out
}

// okConds are the conditions of a pass where nothing went wrong.
var okConds = []string{
	"NamespaceDeletionDiscoveryFailure False ResourcesDiscovered: All resources successfully discovered",
	"NamespaceDeletionGroupVersionParsingFailure False ParsedGroupVersions: All legacy kube types successfully parsed",
	"NamespaceDeletionContentFailure False ContentDeleted: All content successfully deleted, may be waiting on finalization",
	"NamespaceContentRemaining False ContentRemoved: All content successfully removed",
	"NamespaceFinalizersRemaining False ContentHasNoFinalizers: All content-preserving finalizers finished",
}

// withConds returns okConds with the given conditions replacing those of
// their types.
func withConds(replace ...string) []string {
	out := slices.Clone(okConds)
	for _, r := range replace {
		for i, c := range out {
			typ := c[:len(c)-len(c[indexSpace(c):])]
			if len(r) > len(typ) && r[:len(typ)+1] == typ+" " {
				out[i] = r
			}
		}
	}
	return out
}

func indexSpace(s string) int {
	for i := range s {
		if s[i] == ' ' {
			return i
		}
	}
	return len(s)
}
