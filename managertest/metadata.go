package managertest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	clienttesting "k8s.io/client-go/testing"
)

// NewMetadataClient returns a metadata client that reads and writes the
// objects of client: every request is an action on client (so its reactors
// run and client.Actions records it) and every object it returns is the
// typed object's metadata as a PartialObjectMetadata. Objects seeded into
// client, or written through it, are therefore seen by metadata informers,
// and the other way round.
//
// It serves the resources client-go's typed clientset knows; a request for
// any other resource fails with an error naming it, since the typed fake
// cannot store objects it has no Go type for.
func NewMetadataClient(client *fake.Clientset) metadata.Interface {
	return &metadataClient{client: client}
}

type metadataClient struct {
	client *fake.Clientset
}

// IsWatchListSemanticsUnSupported tells client-go's informers to list and
// then watch: like the typed fake it wraps, this client cannot stream a
// list as watch events.
func (c *metadataClient) IsWatchListSemanticsUnSupported() bool { return true }

func (c *metadataClient) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return &metadataResource{client: c.client, gvr: gvr}
}

type metadataResource struct {
	client    *fake.Clientset
	gvr       schema.GroupVersionResource
	namespace string
}

var _ metadata.Getter = (*metadataResource)(nil)

func (r *metadataResource) Namespace(ns string) metadata.ResourceInterface {
	cp := *r
	cp.namespace = ns
	return &cp
}

func (r *metadataResource) Get(
	_ context.Context,
	name string,
	opts metav1.GetOptions,
	subresources ...string,
) (*metav1.PartialObjectMetadata, error) {
	obj, err := r.client.Invokes(
		clienttesting.NewGetSubresourceAction(r.gvr, r.namespace, subresource(subresources), name),
		nil,
	)
	if err != nil {
		return nil, err
	}
	return r.partial(obj)
}

func (r *metadataResource) List(
	_ context.Context,
	opts metav1.ListOptions,
) (*metav1.PartialObjectMetadataList, error) {
	gvk, err := kindFor(r.gvr)
	if err != nil {
		return nil, err
	}
	obj, err := r.client.Invokes(
		clienttesting.NewListActionWithOptions(r.gvr, gvk, r.namespace, opts),
		nil,
	)
	if err != nil {
		return nil, err
	}
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, fmt.Errorf("labelSelector %q: %w", opts.LabelSelector, err)
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
	}
	if l, err := meta.ListAccessor(obj); err == nil {
		out.ResourceVersion = l.GetResourceVersion()
	}
	for _, item := range items {
		p, err := r.partial(item)
		if err != nil {
			return nil, err
		}
		if sel.Matches(labels.Set(p.Labels)) {
			out.Items = append(out.Items, *p)
		}
	}
	return out, nil
}

func (r *metadataResource) Watch(
	_ context.Context,
	opts metav1.ListOptions,
) (watch.Interface, error) {
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, fmt.Errorf("labelSelector %q: %w", opts.LabelSelector, err)
	}
	w, err := r.client.InvokesWatch(
		clienttesting.NewWatchActionWithOptions(r.gvr, r.namespace, opts),
	)
	if err != nil {
		return nil, err
	}
	return newPartialWatch(w, func(e watch.Event) (watch.Event, bool) {
		if e.Type == watch.Error || e.Type == watch.Bookmark {
			return e, true
		}
		p, err := r.partial(e.Object)
		if err != nil {
			return watch.Event{Type: watch.Error, Object: &metav1.Status{
				Status: metav1.StatusFailure, Message: err.Error(),
			}}, true
		}
		return watch.Event{Type: e.Type, Object: p}, sel.Matches(labels.Set(p.Labels))
	}), nil
}

// partialWatch converts the events of a watch. Unlike watch.Filter, its
// goroutine ends on Stop even when nobody reads the remaining events.
type partialWatch struct {
	in       watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func newPartialWatch(
	in watch.Interface,
	convert func(watch.Event) (watch.Event, bool),
) *partialWatch {
	w := &partialWatch{in: in, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		for {
			var e watch.Event
			var ok bool
			select {
			case e, ok = <-in.ResultChan():
				if !ok {
					return
				}
			case <-w.stop:
				return
			}
			e, keep := convert(e)
			if !keep {
				continue
			}
			select {
			case w.out <- e:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *partialWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *partialWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}

// Delete invokes a delete action carrying opts, so reactors see them (the
// propagation policy, for one). The fake clientset's tracker ignores
// preconditions, so they are checked here first, as the API server does.
func (r *metadataResource) Delete(
	_ context.Context,
	name string,
	opts metav1.DeleteOptions,
	subresources ...string,
) error {
	if err := r.checkPreconditions(name, opts.Preconditions); err != nil {
		return err
	}
	action := clienttesting.NewDeleteSubresourceActionWithOptions(
		r.gvr, subresource(subresources), r.namespace, name, opts)
	_, err := r.client.Invokes(action, nil)
	return err
}

// checkPreconditions compares p with the object stored in the fake
// clientset's tracker and, on a mismatch, returns the 409 Conflict the API
// server answers; the delete is then neither invoked nor recorded. The object
// is read from the tracker, not through an action, so no get is recorded and
// no reactor runs. A missing object is left to the delete to report. The check
// and the delete are not atomic: a write in between is not seen.
func (r *metadataResource) checkPreconditions(name string, p *metav1.Preconditions) error {
	if p == nil || (p.UID == nil && p.ResourceVersion == nil) {
		return nil
	}
	obj, err := r.client.Tracker().Get(r.gvr, r.namespace, name)
	if err != nil {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("managertest: %s %q: %w", r.gvr, name, err)
	}
	var msg string
	switch {
	case p.UID != nil && *p.UID != m.GetUID():
		msg = fmt.Sprintf("Precondition failed: UID in precondition: %v, UID in object meta: %v",
			*p.UID, m.GetUID())
	case p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion():
		msg = fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %v, "+
			"ResourceVersion in object meta: %v", *p.ResourceVersion, m.GetResourceVersion())
	default:
		return nil
	}
	return apierrors.NewConflict(r.gvr.GroupResource(), name, errors.New(msg))
}

// DeleteCollection lists and deletes one by one, each delete carrying opts
// (preconditions included, as the API server applies them to each item): the
// fake clientset's object reactor has no delete-collection.
func (r *metadataResource) DeleteCollection(
	ctx context.Context,
	opts metav1.DeleteOptions,
	listOpts metav1.ListOptions,
) error {
	list, err := r.List(ctx, listOpts)
	if err != nil {
		return err
	}
	for _, item := range list.Items {
		res := r.Namespace(item.Namespace)
		if err := res.Delete(ctx, item.Name, opts); err != nil {
			return err
		}
	}
	return nil
}

func (r *metadataResource) Patch(
	_ context.Context,
	name string,
	pt types.PatchType,
	data []byte,
	opts metav1.PatchOptions,
	subresources ...string,
) (*metav1.PartialObjectMetadata, error) {
	obj, err := r.client.Invokes(
		clienttesting.NewPatchSubresourceAction(
			r.gvr,
			r.namespace,
			name,
			pt,
			data,
			subresources...),
		nil,
	)
	if err != nil {
		return nil, err
	}
	return r.partial(obj)
}

// partial turns a typed object into its metadata, typed with the object's
// apiVersion and kind as the API server's metadata responses are.
func (r *metadataResource) partial(obj runtime.Object) (*metav1.PartialObjectMetadata, error) {
	if obj == nil {
		return nil, fmt.Errorf("managertest: no object for %s", r.gvr)
	}
	if p, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return p.DeepCopy(), nil
	}
	acc, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, fmt.Errorf("managertest: %s: %T has no ObjectMeta", r.gvr, obj)
	}
	om, ok := acc.GetObjectMeta().(*metav1.ObjectMeta)
	if !ok {
		return nil, fmt.Errorf("managertest: %s: %T has no ObjectMeta", r.gvr, obj)
	}
	gvk, err := kindFor(r.gvr)
	if err != nil {
		return nil, err
	}
	p := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind},
	}
	om.DeepCopyInto(&p.ObjectMeta)
	return p, nil
}

func subresource(subresources []string) string {
	if len(subresources) == 0 {
		return ""
	}
	return subresources[0]
}

// kindFor finds the kind that client-go's scheme stores under gvr, guessing
// resource names from kinds the way the API server's defaults name them.
func kindFor(gvr schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	for kind := range scheme.Scheme.KnownTypes(gvr.GroupVersion()) {
		gvk := gvr.GroupVersion().WithKind(kind)
		if plural, _ := meta.UnsafeGuessKindToResource(gvk); plural.Resource == gvr.Resource {
			return gvk, nil
		}
	}
	return schema.GroupVersionKind{}, fmt.Errorf(
		"managertest: the fake clientset has no Go type for %s; the metadata client "+
			"serves only client-go's typed resources",
		gvr,
	)
}
