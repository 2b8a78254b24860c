package informers

import (
	"time"

	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// userInformer is a Set's informer as one user got it: the event handlers
// the user adds through it are recorded, and removed when the user is
// released, from the informers that others go on using.
type userInformer struct {
	cache.SharedIndexInformer
	s *Set
}

// handOut returns inf as s's user gets it; the Set itself gets it as is
// (it is never released).
func (s *Set) handOut(inf cache.SharedIndexInformer) cache.SharedIndexInformer {
	if s.holder == "" {
		return inf
	}
	return userInformer{inf, s}
}

// handOutGeneric is handOut for an informer with its lister.
func (s *Set) handOutGeneric(gi kinformers.GenericInformer) kinformers.GenericInformer {
	if s.holder == "" {
		return gi
	}
	return genericInformer{s.handOut(gi.Informer()), gi.Lister()}
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
