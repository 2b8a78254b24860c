// Package warmset keeps a controller host's declared informers started and
// synced ahead of the term that will adopt them (warm standby): a Set is an
// informers.Set holding only the informers the would-be term's controllers
// declare (descriptor.WithInformers), each with its declared indexes added
// before it starts, so that they are built during the LIST.
//
// Guarantees: one informer per declared resource, however many
// controllers declare it; the first object type and the first indexer of
// each name declared win; an informer declared by controllers is held for
// each of them until Release of the last; Stop stops every informer and
// waits for them.
//
// Non-guarantees: an informer or index that cannot be made is logged and
// left out (the term that adopts the set requests it again, and fails
// there if it must); nothing checks that a controller reads only what it
// declared (informers.Options.Reads does, for fields).
package warmset

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/informers"
)

// Declared is an informer a would-be term's controllers declare, with the
// indexes they add to it.
type Declared struct {
	Resource schema.GroupVersionResource
	Indexers cache.Indexers
	// Object, if set, is the Go type the informer's objects are converted
	// into (informers.Custom): the warm informer is that custom one.
	Object runtime.Object
	// Users are who declared it (controllers): the warm set holds it for
	// each, until Set.Release of the last of them. None: it is the set's
	// own, for its whole life.
	Users []string
}

// Declare adds user's declaration of the informer of resource (of Go type
// object when it is not nil, with indexers) to declared and returns it.
// A resource keeps one entry however many declare it: each user is added
// to its Users, the first object type declared is kept, and of indexers
// of the same name the first declared.
func Declare(declared []Declared, user string, resource schema.GroupVersionResource,
	object runtime.Object, indexers cache.Indexers) []Declared {
	i := slices.IndexFunc(declared, func(d Declared) bool { return d.Resource == resource })
	if i < 0 {
		declared = append(declared, Declared{Resource: resource, Indexers: cache.Indexers{}})
		i = len(declared) - 1
	}
	d := &declared[i]
	d.Users = append(d.Users, user)
	if d.Object == nil {
		d.Object = object
	}
	if d.Indexers == nil {
		d.Indexers = cache.Indexers{}
	}
	for name, f := range indexers {
		if _, ok := d.Indexers[name]; !ok {
			d.Indexers[name] = f
		}
	}
	return declared
}

// Set is an informers.Set kept started and synced ahead of the term that
// will adopt it. Exactly one term adopts it, through Informers, and stops
// it with Stop when the term ends; a Set no term adopted is stopped by its
// owner.
type Set struct {
	set       *informers.Set
	mu        sync.Mutex
	holders   map[string]*informers.Set // by user: what Declared.Users hold, until Release
	resources int
	cancel    context.CancelFunc
	bg        sync.WaitGroup
}

// Start starts a Set of the declared informers, or returns nil when none
// is declared. It logs "Warm standby: caches synced" once they are. It
// stops when ctx ends, or earlier with Stop.
func Start(
	ctx context.Context,
	client kubernetes.Interface,
	metaClient metadata.Interface,
	opts informers.Options,
	declared []Declared,
) *Set {
	if len(declared) == 0 {
		return nil
	}
	log := logr.FromContextOrDiscard(ctx)
	set := informers.New(client, metaClient, opts)
	holders := map[string]*informers.Set{}
	resources := 0
	for _, d := range declared {
		views := []*informers.Set{set}
		if len(d.Users) > 0 {
			views = views[:0]
			for _, u := range d.Users {
				if holders[u] == nil {
					holders[u] = set.For(u)
				}
				views = append(views, holders[u])
			}
		}
		var shared cache.SharedIndexInformer
		var err error
		for _, v := range views {
			if shared, err = v.Declared(d.Resource, d.Object); err != nil {
				break
			}
		}
		if err != nil {
			log.Error(err, "Warm standby: cannot keep an informer", "resource", d.Resource.String())
			continue
		}
		resources++
		for name, f := range d.Indexers {
			if _, ok := shared.GetIndexer().GetIndexers()[name]; ok {
				continue
			}
			if err := shared.AddIndexers(cache.Indexers{name: f}); err != nil {
				log.Error(
					err,
					"Warm standby: cannot add a declared index",
					"resource",
					d.Resource.String(),
					"index",
					name,
				)
			}
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &Set{set: set, holders: holders, resources: resources, cancel: cancel}
	set.Start(wctx.Done())
	start := time.Now()
	w.bg.Go(func() {
		if err := set.WaitForCacheSync(wctx); err == nil {
			log.Info(
				"Warm standby: caches synced",
				"resources",
				resources,
				"took",
				time.Since(start),
			)
		}
	})
	return w
}

// Informers is the warm informer set, for the term that adopts it.
func (w *Set) Informers() *informers.Set { return w.set }

// Release releases what the warm set holds for user's declarations
// (Declared.Users): an informer no other holder holds is stopped. A term
// calls it once user's controller holds its informers itself, or will not
// run. It is safe to call more than once, and for a user that declared
// nothing.
func (w *Set) Release(user string) {
	w.mu.Lock()
	h := w.holders[user]
	delete(w.holders, user) // a term asks again every poll: once is enough
	w.mu.Unlock()
	if h != nil {
		h.Shutdown()
	}
}

// Stop stops the set's informers and waits for them.
func (w *Set) Stop() {
	w.cancel()
	w.bg.Wait()
	w.set.Shutdown()
}
