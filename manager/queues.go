package manager

import (
	"fmt"
	"slices"
	"sync"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

// maxPendingKeys bounds the keys held for a controller that has not yet
// called Handle.
const maxPendingKeys = 10000

// termQueues routes keys between the controllers of one term
// (descriptor.Queues, one view per controller).
type termQueues struct {
	names map[string]string // canonical name and every alias → canonical name

	mu       sync.Mutex
	handlers map[string]func(string)
	pending  map[string][]string
}

func newTermQueues(states []*state) *termQueues {
	q := &termQueues{names: map[string]string{}, handlers: map[string]func(string){},
		pending: map[string][]string{}}
	for _, s := range states {
		q.names[s.desc.Name()] = s.desc.Name()
		for _, a := range s.desc.Aliases() {
			q.names[a] = s.desc.Name()
		}
	}
	return q
}

// forget drops the handler of controller name, which stopped: keys sent
// to it are held again until it runs and calls Handle.
func (q *termQueues) forget(name string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.handlers, name)
}

// forController is the view of controller name.
func (q *termQueues) forController(name string) descriptor.Queues { return queuesOf{q, name} }

type queuesOf struct {
	q    *termQueues
	name string
}

func (v queuesOf) Handle(add func(string)) {
	q := v.q
	q.mu.Lock()
	q.handlers[v.name] = add
	held := q.pending[v.name]
	delete(q.pending, v.name)
	q.mu.Unlock()
	for _, k := range held {
		add(k)
	}
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
		return fmt.Errorf("controller %q: Queues.Send to %q: no such controller runs in this term; it runs %v",
			v.name, controller, known)
	}
	q.mu.Lock()
	add := q.handlers[name]
	if add == nil {
		held := append(q.pending[name], key)
		if len(held) > maxPendingKeys {
			held = held[len(held)-maxPendingKeys:]
		}
		q.pending[name] = held
	}
	q.mu.Unlock()
	if add != nil {
		add(key)
	}
	return nil
}
