package informers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// ObjectOrMetadataFactory hands out a typed informer for a resource client-go
// knows, and a metadata-only informer for any other.
type ObjectOrMetadataFactory interface {
	ForResource(gvr schema.GroupVersionResource) (kinformers.GenericInformer, error)
	Start(stop <-chan struct{})
}

// Options configures a Set. The zero value is usable.
type Options struct {
	// Resync is the default resync period of every informer. Zero disables
	// periodic resync. Default: 0 (the manager passes a jittered value based
	// on --min-resync-period, as KCM does).
	Resync time.Duration
	// KeepManagedFields keeps metadata.managedFields in cached objects.
	// Default: false (they are stripped).
	KeepManagedFields bool
	// Dynamic is the client of the Set's dynamic and custom resource
	// informers (Set.Dynamic, Custom). Default: nil, and they are not
	// offered.
	Dynamic dynamic.Interface
}

// Set is the informer set of one term.
type Set struct {
	typed    kinformers.SharedInformerFactory
	metadata metadatainformer.SharedInformerFactory

	// newNamespaced builds the typed factory of one namespace.
	newNamespaced func(namespace string) kinformers.SharedInformerFactory
	mu            sync.Mutex
	namespaced    map[string]kinformers.SharedInformerFactory

	startOnce sync.Once
	started   chan struct{}

	dynamicClient     dynamic.Interface
	dynamic           *dynamicFactory // nil without a dynamic client
	resync            time.Duration
	keepManagedFields bool
	// Guarded by mu: custom informers, added factories, and what Start
	// gave (the stop channel, and a context that ends with it).
	custom        map[customKey]cache.SharedIndexInformer
	customRunning map[customKey]bool
	customWG      sync.WaitGroup
	factories     []Factory
	stop          <-chan struct{}
	runCtx        context.Context
	cancelRun     context.CancelFunc
}

// New returns a Set over the given clients. It starts nothing.
func New(client kubernetes.Interface, metadataClient metadata.Interface, opts Options) *Set {
	var typedOpts []kinformers.SharedInformerOption
	var metaOpts []metadatainformer.SharedInformerOption
	if !opts.KeepManagedFields {
		typedOpts = append(typedOpts, kinformers.WithTransform(StripManagedFields))
		metaOpts = append(metaOpts, metadatainformer.WithTransform(StripManagedFields))
	}
	return &Set{
		typed:    kinformers.NewSharedInformerFactoryWithOptions(client, opts.Resync, typedOpts...),
		metadata: metadatainformer.NewSharedInformerFactoryWithOptions(metadataClient, opts.Resync, metaOpts...),
		newNamespaced: func(ns string) kinformers.SharedInformerFactory {
			nsOpts := append(slices.Clip(typedOpts), kinformers.WithNamespace(ns))
			return kinformers.NewSharedInformerFactoryWithOptions(client, opts.Resync, nsOpts...)
		},
		namespaced: map[string]kinformers.SharedInformerFactory{},
		started:    make(chan struct{}),

		dynamicClient:     opts.Dynamic,
		dynamic:           newDynamicFactory(opts),
		resync:            opts.Resync,
		keepManagedFields: opts.KeepManagedFields,
		custom:            map[customKey]cache.SharedIndexInformer{},
		customRunning:     map[customKey]bool{},
	}
}

func newDynamicFactory(opts Options) *dynamicFactory {
	if opts.Dynamic == nil {
		return nil
	}
	return &dynamicFactory{
		DynamicSharedInformerFactory: dynamicinformer.NewDynamicSharedInformerFactory(opts.Dynamic, opts.Resync),
		strip:                        !opts.KeepManagedFields,
		seen:                         map[schema.GroupVersionResource]bool{},
	}
}

// Typed returns the typed shared informer factory, over all namespaces.
// Informers requested from it before Start start with it.
func (s *Set) Typed() kinformers.SharedInformerFactory { return s.typed }

// TypedFor returns the typed shared informer factory restricted to
// namespace, for controllers that watch one namespace: their informers list
// and watch only there, so they need RBAC only there and cache nothing
// else. Every call with the same namespace returns the same factory, so
// controllers of the term share its informers. An empty namespace returns
// Typed.
//
// The factory has the Set's lifecycle: Start starts it, Synced and
// WaitForCacheSync wait for it, Shutdown stops it, and managedFields are
// stripped unless KeepManagedFields. As with Typed, informers requested
// after Start start at the next Start.
func (s *Set) TypedFor(namespace string) kinformers.SharedInformerFactory {
	if namespace == "" {
		return s.typed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.namespaced[namespace]
	if !ok {
		f = s.newNamespaced(namespace)
		s.namespaced[namespace] = f
	}
	return f
}

// namespacedFactories returns the namespaced factories made so far, by
// namespace.
func (s *Set) namespacedFactories() map[string]kinformers.SharedInformerFactory {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.namespaced)
}

// Metadata returns the metadata-only shared informer factory, for
// resources whose controllers read only object metadata (and for custom
// resources, which have no typed informers).
func (s *Set) Metadata() metadatainformer.SharedInformerFactory { return s.metadata }

// ObjectOrMetadata returns the Set as an ObjectOrMetadataFactory.
func (s *Set) ObjectOrMetadata() ObjectOrMetadataFactory { return s }

// ForResource returns the typed informer for gvr if client-go has one, and a
// metadata-only informer otherwise.
func (s *Set) ForResource(gvr schema.GroupVersionResource) (kinformers.GenericInformer, error) {
	if inf, err := s.typed.ForResource(gvr); err == nil {
		return inf, nil
	}
	return s.metadata.ForResource(gvr), nil
}

// Start starts every informer requested so far, in every factory (typed,
// metadata and each TypedFor namespace), and closes Started the first time.
// Informers requested later start at the next Start.
func (s *Set) Start(stop <-chan struct{}) {
	s.typed.Start(stop)
	s.metadata.Start(stop)
	for _, f := range s.namespacedFactories() {
		f.Start(stop)
	}
	if s.dynamic != nil {
		s.dynamic.Start(stop)
	}
	s.mu.Lock()
	if s.runCtx == nil {
		s.stop = stop
		s.runCtx, s.cancelRun = context.WithCancel(context.Background())
		// The custom informers run until stop closes or Shutdown.
		runCtx, cancel := s.runCtx, s.cancelRun
		s.customWG.Go(func() {
			select {
			case <-stop:
			case <-runCtx.Done():
			}
			cancel()
		})
	}
	for k, inf := range s.custom {
		s.runCustomLocked(k, inf)
	}
	factories := slices.Clone(s.factories)
	s.mu.Unlock()
	for _, f := range factories {
		f.Start(stop)
	}
	s.startOnce.Do(func() { close(s.started) })
}

// Started is closed once Start has been called.
func (s *Set) Started() <-chan struct{} { return s.started }

// WaitForCacheSync blocks until every started informer has synced or ctx is
// done; the error names the informers that had not synced.
func (s *Set) WaitForCacheSync(ctx context.Context) error {
	pending := s.pending(ctx.Done())
	if len(pending) == 0 {
		return nil
	}
	return fmt.Errorf("informer caches not synced: %v: %w", pending, context.Cause(ctx))
}

// Synced reports, without blocking, whether Start was called and every
// started informer has synced; the error names those that have not.
func (s *Set) Synced() error {
	select {
	case <-s.started:
	default:
		return errors.New("informers not started yet")
	}
	closed := make(chan struct{})
	close(closed)
	if pending := s.pending(closed); len(pending) > 0 {
		return fmt.Errorf("informer caches not synced: %v", pending)
	}
	return nil
}

func (s *Set) pending(stop <-chan struct{}) []string {
	var out []string
	for t, ok := range s.typed.WaitForCacheSync(stop) {
		if !ok {
			out = append(out, t.String())
		}
	}
	for gvr, ok := range s.metadata.WaitForCacheSync(stop) {
		if !ok {
			out = append(out, "metadata "+gvr.String())
		}
	}
	for ns, f := range s.namespacedFactories() {
		for t, ok := range f.WaitForCacheSync(stop) {
			if !ok {
				out = append(out, "namespace "+ns+" "+t.String())
			}
		}
	}
	if s.dynamic != nil {
		for gvr, ok := range s.dynamic.WaitForCacheSync(stop) {
			if !ok {
				out = append(out, "dynamic "+gvr.String())
			}
		}
	}
	s.mu.Lock()
	custom := maps.Clone(s.custom)
	running := maps.Clone(s.customRunning)
	factories := slices.Clone(s.factories)
	s.mu.Unlock()
	for k, inf := range custom {
		if running[k] && !cache.WaitForCacheSync(stop, inf.HasSynced) {
			out = append(out, fmt.Sprintf("custom %v %v", k.gvr, k.typ))
		}
	}
	for _, f := range factories {
		for t, ok := range f.WaitForCacheSync(stop) {
			if !ok {
				out = append(out, t.String())
			}
		}
	}
	slices.Sort(out)
	return out
}

// Shutdown stops every informer of the Set and waits until their goroutines
// have ended. The stop channel passed to Start must be closed first (or be
// closed concurrently), as with client-go's factories.
func (s *Set) Shutdown() {
	s.typed.Shutdown()
	s.metadata.Shutdown()
	for _, f := range s.namespacedFactories() {
		f.Shutdown()
	}
	if s.dynamic != nil {
		s.dynamic.Shutdown()
	}
	s.mu.Lock()
	cancel := s.cancelRun
	factories := slices.Clone(s.factories)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.customWG.Wait()
	for _, f := range factories {
		f.Shutdown()
	}
}

// StripManagedFields is a cache.TransformFunc that drops
// metadata.managedFields. Objects it cannot read metadata from, such as
// tombstones, pass through unchanged.
func StripManagedFields(obj any) (any, error) {
	if _, tomb := obj.(cache.DeletedFinalStateUnknown); tomb {
		return obj, nil
	}
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
