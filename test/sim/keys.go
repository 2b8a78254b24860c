package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/leader"
)

// keyBook follows the keys the main lock's controllers send each other
// through the term's queues (Config.Keys), to check the promise of
// descriptor.Queues: a key sent to a controller that is not running (being
// built, told to stop, stopped) is held for its next start in the term.
// A key is lost when its receiver never took it although a start of the
// receiver in the same term of the same replica had its handler in place,
// while running, after the key was sent: that start must have been handed
// it. A start whose Handle the host ignored (it was told to stop first) or
// whose context ended while it was handed the held keys (its term ended:
// nothing is kept across terms) proves nothing, and is not counted.
type keyBook struct {
	w     *World
	order []string // the controllers that send and take keys

	mu      sync.Mutex
	seq     int64
	n       int
	probes  int
	sent    map[string]sentKey
	got     map[string]bool
	handles []handleCall
}

type sentKey struct {
	seq         int64
	replica, to string
	term        *leader.Term
	description string
}

// handleCall is a start of a controller whose handler took keys while it
// ran.
type handleCall struct {
	seq                 int64
	replica, controller string
	term                *leader.Term
}

func newKeyBook(w *World, cfg Config) *keyBook {
	k := &keyBook{w: w, sent: map[string]sentKey{}, got: map[string]bool{}}
	for _, s := range cfg.Controllers {
		if k.takes(s) {
			k.order = append(k.order, s.Name)
		}
	}
	return k
}

// takes reports whether the controller sends and takes keys: one of the
// main lock's, which share the main term's queues.
func (k *keyBook) takes(s ControllerSpec) bool {
	return k.w.cfg.Keys && !s.Sharded && !s.Migrated && !s.Unowned
}

// send sends a key from one controller to each of the others.
func (k *keyBook) send(replica string, term *leader.Term, from string, q descriptor.Queues) {
	if !slices.Contains(k.order, from) {
		return
	}
	for _, to := range k.order {
		if to == from {
			continue
		}
		k.mu.Lock()
		k.n++
		k.seq++
		key := fmt.Sprintf("%s>%s#%d", from, to, k.n)
		k.sent[key] = sentKey{seq: k.seq, replica: replica, to: to, term: term,
			description: fmt.Sprintf("%v: %s's %s sent %q to %s", k.w.since(), replica, from, key, to)}
		k.mu.Unlock()
		if err := q.Send(to, key); err != nil {
			k.w.violate("%s's %s: Queues.Send(%q): %v", replica, from, to, err)
		}
	}
}

// received records that a receiver took key while running.
func (k *keyBook) received(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.got[key] = true
}

// take is a start of controller calling Queues.Handle: the keys it is
// handed while ctx is live are taken; one handed after is lost, as in a
// work queue shut down. Once Handle returned, a probe sent to itself shows
// whether its handler is the one in place (Send hands it over at once) and
// the start still running; only then is the start counted as one that was
// handed every key held for it.
func (k *keyBook) take(ctx context.Context, replica string, term *leader.Term, controller string,
	q descriptor.Queues) {
	k.mu.Lock()
	k.probes++
	probe := fmt.Sprintf("%s%s#%d", probePrefix, controller, k.probes)
	k.mu.Unlock()
	inPlace := false
	q.Handle(func(key string) {
		switch {
		case ctx.Err() != nil:
		case key == probe:
			inPlace = true
		case strings.HasPrefix(key, probePrefix): // an earlier start's, held for this one
		default:
			k.received(key)
		}
	})
	if err := q.Send(controller, probe); err != nil {
		k.w.violate("%s's %s: Queues.Send to itself: %v", replica, controller, err)
	}
	if !inPlace {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seq++
	k.handles = append(k.handles, handleCall{seq: k.seq, replica: replica,
		controller: controller, term: term})
}

// probePrefix starts the keys a start sends to itself (keyBook.take).
const probePrefix = "probe:"

// lost describes the keys a later start of their receiver should have
// taken, and did not.
func (k *keyBook) lost() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for key, s := range k.sent {
		if k.got[key] {
			continue
		}
		if slices.ContainsFunc(k.handles, func(h handleCall) bool {
			return h.seq > s.seq && h.replica == s.replica && h.term == s.term &&
				h.controller == s.to
		}) {
			out = append(out, s.description+", and a later start of it in the same term never got it")
		}
	}
	slices.Sort(out)
	return out
}
