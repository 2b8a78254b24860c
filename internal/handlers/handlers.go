// Package handlers records the event handlers one controller adds to
// shared informers, so that the host can remove them when it stops that
// controller alone (Manager.SetControllers) while the informers, shared
// with other controllers, go on.
//
// Guarantees: every handler added through a factory or informer a Set
// hands out (Typed, Metadata, Dynamic, ObjectOrMetadata, Informer) is
// recorded; RemoveAll removes each once, and handlers added afterwards
// are removed by the next RemoveAll. The wrapped informers are the shared
// ones: caches, indexers, listers and sync state are theirs.
//
// Non-guarantees: a handler added to an informer obtained some other way
// (the term's *informers.Set, a factory a controller made itself) is not
// recorded.
package handlers

import (
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/informers/admissionregistration"
	"k8s.io/client-go/informers/apiserverinternal"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/informers/autoscaling"
	"k8s.io/client-go/informers/batch"
	"k8s.io/client-go/informers/certificates"
	"k8s.io/client-go/informers/coordination"
	"k8s.io/client-go/informers/core"
	"k8s.io/client-go/informers/discovery"
	"k8s.io/client-go/informers/events"
	"k8s.io/client-go/informers/extensions"
	"k8s.io/client-go/informers/flowcontrol"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/informers/lifecycle"
	"k8s.io/client-go/informers/networking"
	"k8s.io/client-go/informers/node"
	"k8s.io/client-go/informers/policy"
	"k8s.io/client-go/informers/rbac"
	"k8s.io/client-go/informers/resource"
	"k8s.io/client-go/informers/scheduling"
	"k8s.io/client-go/informers/storage"
	"k8s.io/client-go/informers/storagemigration"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// Set is the handlers one controller added. The zero value is not usable:
// make one with New.
type Set struct {
	mu   sync.Mutex
	regs []registration
}

type registration struct {
	inf cache.SharedIndexInformer
	reg cache.ResourceEventHandlerRegistration
}

// New returns an empty Set.
func New() *Set { return &Set{} }

func (s *Set) add(inf cache.SharedIndexInformer, reg cache.ResourceEventHandlerRegistration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regs = append(s.regs, registration{inf, reg})
}

// Len returns how many handlers are recorded and not yet removed.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.regs)
}

// RemoveAll removes every recorded handler from its informer and forgets
// it; the error joins what the informers answered.
func (s *Set) RemoveAll() error {
	s.mu.Lock()
	regs := s.regs
	s.regs = nil
	s.mu.Unlock()
	var errs []error
	for _, r := range regs {
		if err := r.inf.RemoveEventHandler(r.reg); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Informer returns inf with its handlers recorded in s.
func (s *Set) Informer(inf cache.SharedIndexInformer) cache.SharedIndexInformer {
	if inf == nil {
		return nil
	}
	return informer{inf, s}
}

// informer is a shared informer whose added handlers are recorded.
type informer struct {
	cache.SharedIndexInformer
	s *Set
}

func (i informer) AddEventHandler(
	h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.record(i.SharedIndexInformer.AddEventHandler(h))
}

func (i informer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler,
	resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.record(i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync))
}

func (i informer) AddEventHandlerWithOptions(h cache.ResourceEventHandler,
	opts cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.record(i.SharedIndexInformer.AddEventHandlerWithOptions(h, opts))
}

func (i informer) record(reg cache.ResourceEventHandlerRegistration,
	err error) (cache.ResourceEventHandlerRegistration, error) {
	if err == nil {
		i.s.add(i.SharedIndexInformer, reg)
	}
	return reg, err
}

// generic is a GenericInformer whose informer records its handlers.
type generic struct {
	inf    cache.SharedIndexInformer
	lister cache.GenericLister
}

func (g generic) Informer() cache.SharedIndexInformer { return g.inf }
func (g generic) Lister() cache.GenericLister         { return g.lister }

func (s *Set) generic(gi kinformers.GenericInformer) kinformers.GenericInformer {
	return generic{s.Informer(gi.Informer()), gi.Lister()}
}

// Typed returns f (a typed factory of the given namespace, "" for all) as
// one whose informers record their handlers in s. Informers are f's:
// requesting one through the view requests it from f.
func (s *Set) Typed(f kinformers.SharedInformerFactory,
	namespace string) kinformers.SharedInformerFactory {
	return typed{f, s, namespace}
}

type typed struct {
	kinformers.SharedInformerFactory
	s         *Set
	namespace string
}

var _ internalinterfaces.SharedInformerFactory = typed{}

func (f typed) InformerFor(obj runtime.Object,
	newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	return f.s.Informer(f.SharedInformerFactory.InformerFor(obj, newFunc))
}

func (f typed) ForResource(gvr schema.GroupVersionResource) (kinformers.GenericInformer, error) {
	gi, err := f.SharedInformerFactory.ForResource(gvr)
	if err != nil {
		return nil, err
	}
	return f.s.generic(gi), nil
}

func (f typed) Admissionregistration() admissionregistration.Interface {
	return admissionregistration.New(f, f.namespace, nil)
}
func (f typed) Internal() apiserverinternal.Interface {
	return apiserverinternal.New(f, f.namespace, nil)
}
func (f typed) Apps() apps.Interface               { return apps.New(f, f.namespace, nil) }
func (f typed) Autoscaling() autoscaling.Interface { return autoscaling.New(f, f.namespace, nil) }
func (f typed) Batch() batch.Interface             { return batch.New(f, f.namespace, nil) }
func (f typed) Certificates() certificates.Interface {
	return certificates.New(f, f.namespace, nil)
}

func (f typed) Coordination() coordination.Interface {
	return coordination.New(f, f.namespace, nil)
}

func (f typed) Core() core.Interface               { return core.New(f, f.namespace, nil) }
func (f typed) Discovery() discovery.Interface     { return discovery.New(f, f.namespace, nil) }
func (f typed) Events() events.Interface           { return events.New(f, f.namespace, nil) }
func (f typed) Extensions() extensions.Interface   { return extensions.New(f, f.namespace, nil) }
func (f typed) Flowcontrol() flowcontrol.Interface { return flowcontrol.New(f, f.namespace, nil) }
func (f typed) Lifecycle() lifecycle.Interface     { return lifecycle.New(f, f.namespace, nil) }
func (f typed) Networking() networking.Interface   { return networking.New(f, f.namespace, nil) }
func (f typed) Node() node.Interface               { return node.New(f, f.namespace, nil) }
func (f typed) Policy() policy.Interface           { return policy.New(f, f.namespace, nil) }
func (f typed) Rbac() rbac.Interface               { return rbac.New(f, f.namespace, nil) }
func (f typed) Resource() resource.Interface       { return resource.New(f, f.namespace, nil) }
func (f typed) Scheduling() scheduling.Interface   { return scheduling.New(f, f.namespace, nil) }
func (f typed) Storage() storage.Interface         { return storage.New(f, f.namespace, nil) }
func (f typed) Storagemigration() storagemigration.Interface {
	return storagemigration.New(f, f.namespace, nil)
}

// Metadata returns f as a factory whose informers record their handlers in
// s.
func (s *Set) Metadata(
	f metadatainformer.SharedInformerFactory) metadatainformer.SharedInformerFactory {
	return metadataFactory{f, s}
}

type metadataFactory struct {
	metadatainformer.SharedInformerFactory
	s *Set
}

func (f metadataFactory) ForResource(gvr schema.GroupVersionResource) kinformers.GenericInformer {
	return f.s.generic(f.SharedInformerFactory.ForResource(gvr))
}

// Dynamic returns f as a factory whose informers record their handlers in
// s; nil for a nil f.
func (s *Set) Dynamic(
	f dynamicinformer.DynamicSharedInformerFactory) dynamicinformer.DynamicSharedInformerFactory {
	if f == nil {
		return nil
	}
	return dynamicFactory{f, s}
}

type dynamicFactory struct {
	dynamicinformer.DynamicSharedInformerFactory
	s *Set
}

func (f dynamicFactory) ForResource(gvr schema.GroupVersionResource) kinformers.GenericInformer {
	return f.s.generic(f.DynamicSharedInformerFactory.ForResource(gvr))
}

// GenericFactory is what answers ForResource with a typed informer or a
// metadata one (informers.ObjectOrMetadataFactory).
type GenericFactory interface {
	ForResource(gvr schema.GroupVersionResource) (kinformers.GenericInformer, error)
	Start(stop <-chan struct{})
}

// Generic returns f as a factory whose informers record their handlers in
// s.
func (s *Set) Generic(f GenericFactory) GenericFactory { return genericFactory{f, s} }

type genericFactory struct {
	GenericFactory
	s *Set
}

func (f genericFactory) ForResource(
	gvr schema.GroupVersionResource) (kinformers.GenericInformer, error) {
	gi, err := f.GenericFactory.ForResource(gvr)
	if err != nil {
		return nil, err
	}
	return f.s.generic(gi), nil
}
