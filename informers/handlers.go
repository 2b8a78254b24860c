package informers

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// userInformer is a Set's informer as one user got it: the event handlers
// the user adds through it are recorded, and removed when the user is
// released, from the informers that others go on using; the indexes it
// adds are shared with the other holders (addIndexers).
type userInformer struct {
	cache.SharedIndexInformer
	s *Set
	e *entry
}

// handOut returns e's informer as s's user gets it; the Set itself gets it
// as is (it is never released).
func (s *Set) handOut(e *entry) cache.SharedIndexInformer {
	if s.holder == "" {
		return e.inf
	}
	return userInformer{e.inf, s, e}
}

// handOutGeneric is handOut for an informer with its lister (metadata and
// dynamic ones).
func (s *Set) handOutGeneric(e *entry) kinformers.GenericInformer {
	if s.holder == "" {
		return e.generic
	}
	return genericInformer{s.handOut(e), e.generic.Lister()}
}

// AddIndexers adds indexes to the shared informer (see addIndexers).
func (i userInformer) AddIndexers(indexers cache.Indexers) error {
	return i.e.addIndexers(indexers)
}

// GetIndexer returns the informer's indexer, whose AddIndexers shares an
// index as the informer's does.
func (i userInformer) GetIndexer() cache.Indexer {
	return sharedIndexer{i.SharedIndexInformer.GetIndexer(), i.e}
}

// sharedIndexer is a shared informer's indexer as one holder got it.
type sharedIndexer struct {
	cache.Indexer
	e *entry
}

func (x sharedIndexer) AddIndexers(indexers cache.Indexers) error {
	return x.e.addIndexers(indexers)
}

// addIndexers adds indexes to e's informer, which its holders share: an
// index already there under the same name with the same function (the
// same code: a controller that stopped and started again, or two
// controllers adding one index) is shared, not refused as client-go
// refuses it. client-go's indexers cannot drop an index, so one stays on
// its informer until the informer stops, whoever added it. A name already
// there with another function is refused, and then no index is added, as
// client-go does.
func (e *entry) addIndexers(indexers cache.Indexers) error {
	e.indexMu.Lock()
	defer e.indexMu.Unlock()
	have := e.inf.GetIndexer().GetIndexers()
	fresh := cache.Indexers{}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(indexers)) {
		f := indexers[name]
		old, ok := have[name]
		switch {
		case !ok:
			fresh[name] = f
		case !sameFunc(old, f):
			errs = append(errs, fmt.Errorf("informer %v: index %q is there already, with "+
				"another function: an index name must mean one function among the "+
				"controllers that share an informer; give this index a name of its own",
				e.key, name))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(fresh) == 0 {
		return nil
	}
	return e.inf.AddIndexers(fresh)
}

// sameFunc reports whether two index functions are the same code. Two
// closures of one function literal are, whatever they captured.
func sameFunc(a, b cache.IndexFunc) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}

func (i userInformer) AddEventHandler(
	h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.record(i.SharedIndexInformer.AddEventHandler(h))
}

func (i userInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler,
	resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.record(i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync))
}

func (i userInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler,
	opts cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.record(i.SharedIndexInformer.AddEventHandlerWithOptions(h, opts))
}

func (i userInformer) record(reg cache.ResourceEventHandlerRegistration,
	err error) (cache.ResourceEventHandlerRegistration, error) {
	if err == nil {
		c := i.s.c
		c.mu.Lock()
		h := i.s.holder
		c.handlers[h] = append(c.handlers[h], registration{i.SharedIndexInformer, reg})
		c.mu.Unlock()
	}
	return reg, err
}

// HasStarted reports whether the informer was started, where the informer
// says (client-go's do).
func (i userInformer) HasStarted() bool {
	s, ok := i.SharedIndexInformer.(interface{ HasStarted() bool })
	return ok && s.HasStarted()
}

// registration is an event handler one holder added.
type registration struct {
	inf cache.SharedIndexInformer
	reg cache.ResourceEventHandlerRegistration
}
