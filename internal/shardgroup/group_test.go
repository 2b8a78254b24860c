package shardgroup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/shard"
)

// workLog records who works which slot, and any moment two members
// worked one slot at once.
type workLog struct {
	mu       sync.Mutex
	holder   map[int]string
	overlaps []string
}

func (w *workLog) work(member string) SlotFunc {
	return func(ctx context.Context, slot int) error {
		w.mu.Lock()
		if h, ok := w.holder[slot]; ok {
			w.overlaps = append(
				w.overlaps,
				fmt.Sprintf("slot %d: %s started while %s worked it", slot, member, h),
			)
		}
		w.holder[slot] = member
		w.mu.Unlock()
		<-ctx.Done()
		w.mu.Lock()
		if w.holder[slot] == member {
			delete(w.holder, slot)
		}
		w.mu.Unlock()
		return nil
	}
}

// counts returns how many slots each member works now.
func (w *workLog) counts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, m := range w.holder {
		out[m]++
	}
	return out
}

type running struct {
	g      *Group
	cancel context.CancelFunc
	done   chan error
}

// groupHarness runs members of one group over one fake clientset.
type groupHarness struct {
	t      *testing.T
	client *fake.Clientset
	w      *workLog
}

func newGroupHarness(t *testing.T) *groupHarness {
	return &groupHarness{t: t, client: fake.NewClientset(), w: &workLog{holder: map[int]string{}}}
}

// start runs member id; crashy members keep their Leases when stopped, as
// a crashed process would leave them.
func (h *groupHarness) start(id string, crashy bool) *running {
	return h.startWith(id, crashy, h.client)
}

// partitionable returns a clientset over the harness's API whose every
// request fails while *cut is set.
func (h *groupHarness) partitionable(cut *atomic.Bool) *fake.Clientset {
	tracker := h.client.Tracker()
	cs := &fake.Clientset{}
	cs.AddReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		if cut.Load() {
			return true, nil, errors.New("partitioned")
		}
		return false, nil, nil
	})
	cs.AddReactor("*", "*", k8stesting.ObjectReaction(tracker))
	cs.AddWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		if cut.Load() {
			return true, nil, errors.New("partitioned")
		}
		w, err := tracker.Watch(action.GetResource(), action.GetNamespace())
		return true, w, err
	})
	return cs
}

func (h *groupHarness) startWith(id string, crashy bool, client *fake.Clientset) *running {
	return h.startSlots(id, crashy, client, 6)
}

func (h *groupHarness) startSlots(
	id string,
	crashy bool,
	client *fake.Clientset,
	slots int,
) *running {
	return h.startWork(id, crashy, client, slots, h.w.work(id))
}

func (h *groupHarness) startWork(
	id string,
	crashy bool,
	client *fake.Clientset,
	slots int,
	work SlotFunc,
) *running {
	t := h.t
	g, err := NewGroup(GroupConfig{
		Name:  "test-group",
		Space: shard.Space{Slots: slots},
		Lease: leader.Config{
			Identity:          id,
			LeaseDuration:     3 * time.Second,
			RenewDeadline:     1400 * time.Millisecond,
			RetryPeriod:       300 * time.Millisecond,
			KeepLeaseOnCancel: crashy,
		},
	}, client, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{g: g, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- g.Run(ctx, work) }()
	return r
}

func (h *groupHarness) stop(r *running) {
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			h.t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		h.t.Fatal("Run did not return within 30s of its cancellation")
	}
}

func (h *groupHarness) waitFor(what string, want map[string]int) time.Time {
	h.t.Helper()
	var got map[string]int
	var at time.Time
	if !poll.For(30*time.Second, func() bool {
		if got = h.w.counts(); fmt.Sprint(got) != fmt.Sprint(want) {
			return false
		}
		at = time.Now()
		return true
	}) {
		h.t.Fatalf("%s: slots worked %v, want %v", what, got, want)
	}
	return at
}

func (h *groupHarness) checkNoOverlap() {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if len(h.w.overlaps) > 0 {
		h.t.Errorf("slots worked twice at once:\n%s", strings.Join(h.w.overlaps, "\n"))
	}
	if len(h.w.holder) != 0 {
		h.t.Errorf("slots still worked after every Run returned: %v", h.w.holder)
	}
}

// TestGroupSpreadsAndHandsOver: three members split six slots two each;
// one leaving gracefully hands its slots to the other two; a fourth
// joining takes its share; no slot is ever worked by two members at once.
func TestGroupSpreadsAndHandsOver(t *testing.T) {
	h := newGroupHarness(t)
	a, b, c := h.start("a", false), h.start("b", false), h.start("c", false)
	h.waitFor("three members", map[string]int{"a": 2, "b": 2, "c": 2})
	if got := a.g.Held(); len(got) != 2 {
		t.Errorf("a.Held() = %v, want its 2 slots", got)
	}
	h.stop(b)
	h.waitFor("b left", map[string]int{"a": 3, "c": 3})
	d := h.start("d", false)
	h.waitFor("d joined", map[string]int{"a": 2, "c": 2, "d": 2})
	for _, r := range []*running{a, c, d} {
		h.stop(r)
	}
	h.checkNoOverlap()
}

// TestGroupTakesOverACrashedMembersSlots: a member that stops without
// releasing its Leases (a crash) loses its slots once they expire, not
// before, and the survivor works them all.
func TestGroupTakesOverACrashedMembersSlots(t *testing.T) {
	h := newGroupHarness(t)
	x, y := h.start("x", true), h.start("y", false)
	h.waitFor("two members", map[string]int{"x": 3, "y": 3})
	crashed := time.Now()
	h.stop(x)
	took := h.waitFor("x crashed", map[string]int{"y": 6}).Sub(crashed)
	t.Logf("x's slots worked by y %v after the crash (lease 2s)", took.Round(time.Millisecond))
	if took < time.Second {
		t.Errorf("y took x's slots %v after the crash, before their Leases could expire", took)
	}
	// Within LeaseDuration and a bound: not a second LeaseDuration counted
	// from the moment y first looked at the slot Leases.
	if bound := 2*time.Second + 1400*time.Millisecond + 300*time.Millisecond; took > bound {
		t.Errorf(
			"y took x's slots %v after the crash, more than LeaseDuration + RenewDeadline + RetryPeriod (%v)",
			took,
			bound,
		)
	}
	h.stop(y)
	h.checkNoOverlap()
}

// TestGroupPartitionedMemberStopsItsSlots: a member cut off from the API
// server stops working its slots (its slot Leases cannot be renewed)
// before the other member may take them over, and the other takes them
// all; when the partition heals, the slots are shared again.
func TestGroupPartitionedMemberStopsItsSlots(t *testing.T) {
	h := newGroupHarness(t)
	var cut atomic.Bool
	p := h.startWith("p", false, h.partitionable(&cut))
	q := h.start("q", false)
	h.waitFor("two members", map[string]int{"p": 3, "q": 3})
	cut.Store(true)
	h.waitFor("p partitioned", map[string]int{"q": 6})
	cut.Store(false)
	h.waitFor("healed", map[string]int{"p": 3, "q": 3})
	h.stop(p)
	h.stop(q)
	h.checkNoOverlap()
}

// TestGroupMembersThatDisagreeOnTheSpaceWorkNothing: slot 1 of four slots
// holds other keys than slot 1 of six, so members that cut the space
// differently must not share it: both stop working (and say why in Ready)
// until the odd one leaves.
func TestGroupMembersThatDisagreeOnTheSpaceWorkNothing(t *testing.T) {
	h := newGroupHarness(t)
	a := h.start("a", false)
	h.waitFor("a alone", map[string]int{"a": 6})
	b := h.startSlots("b", false, h.client, 4)
	h.waitFor("b joined with four slots", map[string]int{})
	eventuallyErr := func(g *Group, want string) {
		t.Helper()
		var err error
		if !poll.For(30*time.Second, func() bool {
			err = g.Ready()
			return err != nil && strings.Contains(err.Error(), want)
		}) {
			t.Fatalf("Ready() = %v, want an error containing %q", err, want)
		}
	}
	eventuallyErr(
		a.g,
		"members [b] cut the key space into another number of slots than this replica's 6",
	)
	eventuallyErr(
		b.g,
		"members [a] cut the key space into another number of slots than this replica's 4",
	)
	h.stop(b)
	h.waitFor("b left", map[string]int{"a": 6})
	if err := a.g.Ready(); err != nil {
		t.Errorf("a.Ready() after b left = %v, want nil", err)
	}
	h.stop(a)
	h.checkNoOverlap()
}

// TestGroupLeavingMemberAnnouncesBeforeItsSlotsStop: a member leaving
// releases its member Lease at once, while its slot terms still stop, so
// that the others stand for its slots without waiting for all of them;
// still no other member works one of its slots before its term stopped.
func TestGroupLeavingMemberAnnouncesBeforeItsSlotsStop(t *testing.T) {
	h := newGroupHarness(t)
	release := make(chan struct{})
	aWork := h.w.work("a")
	slowToStop := func(ctx context.Context, slot int) error {
		lctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-ctx.Done()
			<-release
			cancel()
		}()
		return aWork(lctx, slot)
	}
	a := h.startWork("a", false, h.client, 6, slowToStop)
	b := h.start("b", false)
	h.waitFor("two members", map[string]int{"a": 3, "b": 3})
	a.cancel()
	member := memberLease("test-group", 6, "a")
	leases := h.client.CoordinationV1().Leases("kube-system")
	if !poll.For(30*time.Second, func() bool {
		le, err := leases.Get(context.Background(), member, metav1.GetOptions{})
		return err == nil && (le.Spec.HolderIdentity == nil || *le.Spec.HolderIdentity == "")
	}) {
		t.Fatalf("a's member Lease still held 30s after a began to leave, while its slots stop")
	}
	if got := h.w.counts(); got["a"] != 3 || got["b"] != 3 {
		t.Errorf("while a's slots stop: slots worked %v, want a's 3 still its own", got)
	}
	close(release)
	h.waitFor("a left", map[string]int{"b": 6})
	h.stop(a)
	h.stop(b)
	h.checkNoOverlap()
}
