package queues_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ctrlhost/ctrlhost/internal/queues"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTerm: keys go to the controller named (or aliased), are held while
// it has no handler (the newest MaxPending), handed over at Handle, held
// again after Forget; a name the term does not run is an error naming
// those it runs.
func TestTerm(t *testing.T) {
	q := queues.New(map[string][]string{"a-controller": {"a"}, "b-controller": nil})
	from := q.For("b-controller")
	for i := range queues.MaxPending + 2 {
		if err := from.Send("a", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	q.For("a-controller").Handle(func(k string) { got = append(got, k) })
	if len(got) != queues.MaxPending || got[0] != "2" {
		t.Fatalf("held %d keys from %q, want the newest %d (from \"2\")",
			len(got), got[0], queues.MaxPending)
	}
	got = nil
	if err := from.Send("a-controller", "now"); err != nil {
		t.Fatal(err)
	}
	q.Forget("a-controller")
	if err := from.Send("a-controller", "later"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"now"}) {
		t.Errorf("keys delivered = %v, want [now] (later is held: a-controller was forgotten)", got)
	}
	got = nil
	q.For("a-controller").Handle(func(k string) { got = append(got, k) })
	if !slices.Equal(got, []string{"later"}) {
		t.Errorf("keys handed at the next Handle = %v, want [later]", got)
	}
	err := from.Send("c-controller", "x")
	if err == nil || !strings.Contains(err.Error(), "[a-controller b-controller]") {
		t.Errorf("Send to an unknown controller: %v, want an error naming those the term runs", err)
	}
}

// TestForgetSilencesTheStoppedStart: once Forget was called, the start
// being stopped takes no key, not even by a Handle it calls late; the keys
// wait for the next start.
func TestForgetSilencesTheStoppedStart(t *testing.T) {
	q := queues.New(map[string][]string{"a-controller": nil, "b-controller": nil})
	from := q.For("b-controller")
	stopping := q.For("a-controller")
	var old, next []string
	stopping.Handle(func(k string) { old = append(old, k) })
	q.Forget("a-controller")
	if err := from.Send("a-controller", "while-stopping"); err != nil {
		t.Fatal(err)
	}
	stopping.Handle(func(k string) { old = append(old, k) }) // late, from the stopped start
	if err := from.Send("a-controller", "after-late-handle"); err != nil {
		t.Fatal(err)
	}
	if len(old) != 0 {
		t.Errorf("the stopped start got %v; keys sent once it was told to stop must wait", old)
	}
	q.For("a-controller").Handle(func(k string) { next = append(next, k) })
	if want := []string{"while-stopping", "after-late-handle"}; !slices.Equal(next, want) {
		t.Errorf("the next start got %v, want %v", next, want)
	}
}
