// Package nometadata is a metadata client that holds no objects: the one a
// Manager built over ready-made clients without a metadata client gets.
// Lists are empty, a watch sends nothing until it is stopped, and a get,
// patch or delete of an object is 404 NotFound. It is not a test double:
// production builds link it.
package nometadata

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
)

// Client is the metadata client that holds no objects.
type Client struct{}

var _ metadata.Interface = Client{}

func (Client) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return resource{gr: gvr.GroupResource()}
}

// IsWatchListSemanticsUnSupported tells informers to list, then watch: a
// watch of this client streams no initial list.
func (Client) IsWatchListSemanticsUnSupported() bool { return true }

type resource struct{ gr schema.GroupResource }

func (r resource) Namespace(string) metadata.ResourceInterface { return r }

func (r resource) Delete(_ context.Context, name string, _ metav1.DeleteOptions,
	_ ...string) error {
	return apierrors.NewNotFound(r.gr, name)
}

func (resource) DeleteCollection(context.Context, metav1.DeleteOptions,
	metav1.ListOptions) error {
	return nil
}

func (r resource) Get(_ context.Context, name string, _ metav1.GetOptions,
	_ ...string) (*metav1.PartialObjectMetadata, error) {
	return nil, apierrors.NewNotFound(r.gr, name)
}

func (resource) List(context.Context,
	metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1",
		Kind: "PartialObjectMetadataList"}}, nil
}

func (resource) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return &silentWatch{ch: make(chan watch.Event)}, nil
}

func (r resource) Patch(_ context.Context, name string, _ types.PatchType, _ []byte,
	_ metav1.PatchOptions, _ ...string) (*metav1.PartialObjectMetadata, error) {
	return nil, apierrors.NewNotFound(r.gr, name)
}

// silentWatch sends nothing; its channel closes when it is stopped.
type silentWatch struct {
	once sync.Once
	ch   chan watch.Event
}

func (w *silentWatch) Stop()                          { w.once.Do(func() { close(w.ch) }) }
func (w *silentWatch) ResultChan() <-chan watch.Event { return w.ch }
