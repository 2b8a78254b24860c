package informers

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/ctrlhost/ctrlhost/informers/internal/prune"
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
	// Reads says, by user (as For names them), which fields of typed
	// resources each user reads. A typed informer keeps only the fields
	// its holders read, and drops the others before they reach its cache;
	// a holder that did not declare a resource reads it whole. Paths that
	// CheckFields rejects are read whole. Default: nil, every field kept.
	Reads map[string]Fields
	// Anticipate names users (as Reads does) that may hold the Set's
	// informers once they run: a typed informer made before it starts
	// also keeps what they read of its type, so that it covers them when
	// they come and they need no informer of their own. What an
	// anticipated user reads of a type is what it declared (Reads); one
	// that did not declare the type reads it whole, unless Informers says
	// it requests no informer of that type. A warm set (warm standby)
	// anticipates every controller of the term that will adopt it.
	// Default: none.
	Anticipate []string
	// Informers names, by user (as Reads does), the informers each user
	// declared it requests (descriptor.WithInformers), for Anticipate: a
	// user listed here with resources requests no typed informer of any
	// other resource. A user not listed, or listed with none, may request
	// any. Default: nil.
	Informers map[string][]schema.GroupVersionResource
	// InternStrings makes the strings of typed and metadata informers'
	// objects that repeat across objects share one copy (label keys and
	// values, namespaces, owner and node names), which a decoder copies
	// into every object. Values are unchanged. Default: false.
	InternStrings bool
}

// Set is the informer set of one term, as one holder sees it. New returns
// the Set itself; For returns the same Set held by one user (a
// controller): the informers requested through it are counted as held by
// it, and its Shutdown releases them.
type Set struct {
	c      *core
	user   string // "" for the Set itself
	holder string // unique per view; "" for the Set itself

	startOnce sync.Once
	started   chan struct{}

	mu         sync.Mutex
	namespaced map[string]*typedFactory
}

// New returns a Set over the given clients. It starts nothing.
func New(client kubernetes.Interface, metadataClient metadata.Interface, opts Options) *Set {
	c := &core{
		client:   client,
		metadata: metadataClient,
		dynamic:  opts.Dynamic,
		resync:   opts.Resync,
		strip:    !opts.KeepManagedFields,
		intern:   opts.InternStrings,
		plans:    compilePlans(opts.Reads),
		expected: slices.Clone(opts.Anticipate),
		requests: typesOf(opts.Informers),
		wants:    map[wantKey]*prune.Plan{},
		entries:  map[key]*entry{},
		variants: map[key]int{},
		handlers: map[string][]registration{},
	}
	return c.view("")
}

// For returns a new holder of the Set, named user: the same informers,
// shared with every other holder, but each informer requested through it
// (its factories, ForResource, Custom, and the factories added with
// AddFactory) counts it among its holders, and the event handlers added to
// them through it are recorded. Its Shutdown releases them: the handlers
// are removed, and an informer no holder holds any more is stopped and
// dropped, so that its cache is freed, while one that others hold goes on
// untouched. Each call returns a holder of its own, even for one user: a
// controller started twice holds through two holders, and releasing the
// first leaves the second's alone. An empty user is "unnamed".
//
// The Set itself (New's) is a holder too, that never lets go before its
// own Shutdown: what is requested through it stays for the Set's life.
func (s *Set) For(user string) *Set {
	if user == "" {
		user = "unnamed"
	}
	return s.c.view(user)
}

// User returns the user this holder was made for (For), "" for the Set
// itself.
func (s *Set) User() string { return s.user }

// Typed returns the typed shared informer factory, over all namespaces.
// Informers requested from it before Start start with it.
//
// The factory is the Set's, not client-go's: its Start starts the Set's
// pending informers (on the Set's lifetime, whatever channel it is given),
// its Shutdown does nothing (the Set's Shutdown stops them), and its
// WaitForCacheSync covers the started informers of its namespace.
func (s *Set) Typed() kinformers.SharedInformerFactory { return s.TypedFor("") }

// TypedFor returns the typed shared informer factory restricted to
// namespace, for controllers that watch one namespace: their informers list
// and watch only there, so they need RBAC only there and cache nothing
// else. Controllers of the term share its informers. An empty namespace
// is Typed.
//
// The factory has the Set's lifecycle: Start starts it, Synced and
// WaitForCacheSync wait for it, Shutdown stops it, and managedFields are
// stripped unless KeepManagedFields. As with Typed, informers requested
// after Start start at the next Start.
func (s *Set) TypedFor(namespace string) kinformers.SharedInformerFactory {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.namespaced[namespace]
	if !ok {
		f = &typedFactory{s: s, namespace: namespace}
		s.namespaced[namespace] = f
	}
	return f
}

// Metadata returns the metadata-only shared informer factory, for
// resources whose controllers read only object metadata (and for custom
// resources, which have no typed informers). Its Start and Shutdown behave
// as Typed's.
func (s *Set) Metadata() metadatainformer.SharedInformerFactory {
	return gvrFactory{s, metadataKind}
}

// ObjectOrMetadata returns the Set as an ObjectOrMetadataFactory.
func (s *Set) ObjectOrMetadata() ObjectOrMetadataFactory { return s }

// ForResource returns the typed informer for gvr if client-go has one, and a
// metadata-only informer otherwise.
func (s *Set) ForResource(gvr schema.GroupVersionResource) (kinformers.GenericInformer, error) {
	if inf, err := s.TypedFor("").ForResource(gvr); err == nil {
		return inf, nil
	}
	return s.Metadata().ForResource(gvr), nil
}

// Start starts every informer of the Set requested so far and not started
// yet (by any user, in every factory: typed, metadata, dynamic, custom,
// each TypedFor namespace, and the added ones), and closes this view's
// Started the first time. Informers requested later start at the next
// Start.
//
// The first Start of the Set (through any view) gives it its lifetime:
// its informers run until that stop channel closes or the Set's Shutdown.
// A later Start's channel is not used.
func (s *Set) Start(stop <-chan struct{}) {
	s.c.start(stop)
	s.startOnce.Do(func() { close(s.started) })
}

// Started is closed once Start has been called on this view.
func (s *Set) Started() <-chan struct{} { return s.started }

// WaitForCacheSync blocks until every started informer this view's user
// holds (every one, for the Set itself) has synced, or ctx is done; the
// error names the informers that had not synced.
func (s *Set) WaitForCacheSync(ctx context.Context) error {
	pending := s.c.pending(ctx, s.holder)
	if len(pending) == 0 {
		return nil
	}
	return fmt.Errorf("informer caches not synced: %v: %w", pending, context.Cause(ctx))
}

// Synced reports, without blocking, whether Start was called and every
// started informer this view's user holds (every one, for the Set itself)
// has synced; the error names those that have not.
func (s *Set) Synced() error {
	select {
	case <-s.started:
	default:
		return errors.New("informers not started yet")
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if pending := s.c.pending(done, s.holder); len(pending) > 0 {
		return fmt.Errorf("informer caches not synced: %v", pending)
	}
	return nil
}

// Shutdown, on the Set itself, stops every informer of the Set and waits
// until their goroutines have ended; informers requested afterwards never
// start. On a view (For), it releases the user's informers: those no other
// user holds are stopped, waited for and dropped, the factories the user
// added are shut down, and the others go on. Either is safe to call more
// than once, and after a failed or partial start.
func (s *Set) Shutdown() {
	if s.holder == "" {
		s.c.shutdown()
		return
	}
	s.c.release(s.holder)
}

// Informers returns how many informers the Set holds now (requested and
// not released, started or not), for tests and diagnostics.
func (s *Set) Informers() int {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return len(s.c.entries)
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

// Dynamic returns the Set's dynamic informer factory: informers of any
// resource, custom ones included, whose caches hold
// *unstructured.Unstructured, managedFields stripped unless
// KeepManagedFields. It has the Set's lifecycle. Nil when the Set has no
// dynamic client (Options.Dynamic).
func (s *Set) Dynamic() dynamicinformer.DynamicSharedInformerFactory {
	if s.c.dynamic == nil {
		return nil
	}
	return gvrFactory{s, dynamicKind}
}
