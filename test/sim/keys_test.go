package sim

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ctrlhost/ctrlhost/internal/queues"
	"github.com/ctrlhost/ctrlhost/leader"
)

func keyWorld() (*World, *queues.Term, *leader.Term) {
	w := newWorld(Config{Keys: true, Controllers: []ControllerSpec{{Name: "a"}, {Name: "b"}}})
	return w, queues.New(map[string][]string{"a": nil, "b": nil}), new(leader.Term)
}

// The key book judges the host's promise that a key sent to a controller
// that is not running is handed to its next start in the term. A start
// that cannot have been handed it — its term ended while it was being
// handed the held keys (simulation seed 18844), or the host ignored its
// Handle because it was told to stop first — is no evidence of a loss.
func TestAKeyIsNotLostToAStartThatCouldNotTakeIt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(w *World, q *queues.Term, term *leader.Term)
	}{{
		name: "its term ended as it started",
		start: func(w *World, q *queues.Term, term *leader.Term) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			w.keys.take(ctx, "r0", term, "b", q.For("b"))
		},
	}, {
		name: "told to stop before it called Handle",
		start: func(w *World, q *queues.Term, term *leader.Term) {
			view := q.For("b")
			q.Forget("b")
			w.keys.take(context.Background(), "r0", term, "b", view)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w, q, term := keyWorld()
			w.keys.send("r0", term, "a", q.For("a")) // b has no handler: held
			tc.start(w, q, term)
			if lost := w.keys.lost(); len(lost) > 0 {
				t.Errorf("lost() = %q, want nothing: no start could take the key", lost)
			}
			if len(w.violations) > 0 {
				t.Errorf("violations: %q", w.violations)
			}
		})
	}
}

// And the book still sees a key the host did lose: one handed to the
// handler of a start that had stopped (not forgotten, as when the host
// forgot a controller only after its queue shut down), with a later start
// of it running and handed nothing.
func TestAKeyHandedToAStoppedStartIsLost(t *testing.T) {
	w, q, term := keyWorld()
	first, stop := context.WithCancel(context.Background())
	w.keys.take(first, "r0", term, "b", q.For("b"))
	stop() // and the host does not call q.Forget("b")
	w.keys.send("r0", term, "a", q.For("a"))
	w.keys.take(context.Background(), "r0", term, "b", q.For("b"))
	lost := w.keys.lost()
	if len(lost) != 1 || !strings.Contains(lost[0], `to b, and a later start of it`) {
		t.Errorf("lost() = %q, want the key a sent to b", lost)
	}
}

// A start that is running takes the keys held for it and those sent while
// it runs; the probes it sends itself are not keys.
func TestARunningStartTakesHeldAndLaterKeys(t *testing.T) {
	w, q, term := keyWorld()
	w.keys.send("r0", term, "a", q.For("a"))
	w.keys.take(context.Background(), "r0", term, "b", q.For("b"))
	w.keys.send("r0", term, "a", q.For("a"))
	if lost := w.keys.lost(); len(lost) > 0 {
		t.Errorf("lost() = %q, want nothing", lost)
	}
	got := slices.Sorted(func(yield func(string) bool) {
		for k := range w.keys.got {
			if !yield(k) {
				return
			}
		}
	})
	if want := []string{"a>b#1", "a>b#2"}; !slices.Equal(got, want) {
		t.Errorf("taken keys = %q, want %q", got, want)
	}
}
