// Package queues routes keys between the controllers of one term of a
// controller host: descriptor.Queues, one view per controller.
//
// Guarantees: a key sent to a controller that has not called Handle (it is
// being built, or told to stop and not started again) is held, up to
// MaxPending per controller (the oldest dropped first), and handed to the
// next Handle of a start after that; once Forget was called for a
// controller, the views handed out before it (to the start being stopped)
// take no key, even if they call Handle later; aliases name the same
// controller; a Send to a name the term does not run is an error naming
// the ones it runs.
//
// Non-guarantees: keys are not de-duplicated (the receiver's workqueue
// does that), and nothing is kept across terms.
package queues

import (
	"fmt"
	"slices"
	"sync"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// MaxPending bounds the keys held for a controller that has not yet
// called Handle.
const MaxPending = 10000

// Term routes keys between the controllers of one term.
type Term struct {
	names map[string]string // canonical name and every alias → canonical name

	mu       sync.Mutex
	handlers map[string]func(string)
	pending  map[string][]string
	// gen counts Forget calls, by controller: a view made before the last
	// one belongs to a start that was told to stop.
	gen map[string]int
	// handing counts, by controller, the keys being handed to its handler
	// now; Forget waits for them (done is signalled when one ends).
	handing map[string]int
	done    *sync.Cond
}

// New returns the queues of a term whose controllers are named by the keys
// of controllers, each with its aliases.
func New(controllers map[string][]string) *Term {
	q := &Term{names: map[string]string{}, handlers: map[string]func(string){},
		pending: map[string][]string{}, gen: map[string]int{}, handing: map[string]int{}}
	q.done = sync.NewCond(&q.mu)
	for name, aliases := range controllers {
		q.names[name] = name
		for _, a := range aliases {
			q.names[a] = name
		}
	}
	return q
}

// Forget drops the handler of controller name, which is told to stop (or
// stopped): keys sent to it are held again until a later start calls
// Handle. The views For handed out so far take no key any more: a Handle
// call from the start being stopped is ignored. It returns once no key is
// being handed to the handler it dropped, so that a caller that then stops
// the controller stops no queue a key is still on its way to.
func (q *Term) Forget(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.handlers, name)
	q.gen[name]++
	for q.handing[name] > 0 {
		q.done.Wait()
	}
}

// For is the view of controller name, for one start of it.
func (q *Term) For(name string) descriptor.Queues {
	q.mu.Lock()
	defer q.mu.Unlock()
	return queuesOf{q, name, q.gen[name]}
}

type queuesOf struct {
	q    *Term
	name string
	gen  int // Term.gen when it was made
}

func (v queuesOf) Handle(add func(string)) {
	q := v.q
	q.mu.Lock()
	if q.gen[v.name] != v.gen {
		// Its start was told to stop: the keys wait for the next one.
		q.mu.Unlock()
		return
	}
	q.handlers[v.name] = add
	held := q.pending[v.name]
	delete(q.pending, v.name)
	q.handing[v.name]++
	q.mu.Unlock()
	defer q.handed(v.name)
	for _, k := range held {
		add(k)
	}
}

// handed records that a key (or the held ones) reached name's handler.
func (q *Term) handed(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.handing[name]--
	q.done.Broadcast()
}

func (v queuesOf) Send(controller, key string) error {
	q := v.q
	name, ok := q.names[controller]
	if !ok {
		known := make([]string, 0, len(q.names))
		for n, c := range q.names {
			if n == c {
				known = append(known, n)
			}
		}
		slices.Sort(known)
		return fmt.Errorf("controller %q: Queues.Send to %q: no such controller runs in "+
			"this term; it runs %v", v.name, controller, known)
	}
	q.mu.Lock()
	add := q.handlers[name]
	if add == nil {
		held := append(q.pending[name], key)
		if len(held) > MaxPending {
			held = held[len(held)-MaxPending:]
		}
		q.pending[name] = held
		q.mu.Unlock()
		return nil
	}
	q.handing[name]++
	q.mu.Unlock()
	defer q.handed(name)
	add(key)
	return nil
}
