package shardgroup

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/shard"
)

// GroupConfig configures one replica's part in a sharded group.
type GroupConfig struct {
	// Name names the group's Leases: "<Name>-member-s<Slots>-<hash of
	// identity>" for each member, "<Name>-slot-<i>" for each slot.
	Name string
	// Space is the key space; every member must use the same.
	Space shard.Space
	// Lease gives the namespace, this replica's identity and the
	// durations of every Lease of the group (its Name is not used).
	Lease leader.Config
}

// SlotFunc works one slot until ctx is done. ctx carries the slot's
// leader.Term (leader.TermFrom): its Gate fences the slot's writes.
type SlotFunc func(ctx context.Context, slot int) error

// Group is one replica's membership in a sharded group: it holds a member
// Lease while Run runs, and a slot Lease for each slot Assign gives it
// among the live members, running a SlotFunc term under each.
//
// A slot changes hands only through its Lease: a member that no longer
// should own a slot stops its term and then releases the Lease (leader's
// guarantee), and the new owner's elector, watching that Lease, takes it
// at once; a crashed member's slot Leases expire. So no slot is worked by
// two members at once, as far as leader's guarantees go.
type Group struct {
	cfg    GroupConfig
	client kubernetes.Interface
	log    logr.Logger
	member *leader.Elector

	mu       sync.Mutex
	held     map[int]bool
	mismatch string // why this replica works no slot, when members disagree on the Space
}

// NewGroup checks cfg and returns a Group. It starts nothing.
func NewGroup(cfg GroupConfig, client kubernetes.Interface, log logr.Logger) (*Group, error) {
	var errs []error
	if err := cfg.Space.Validate(); err != nil {
		errs = append(errs, err)
	}
	cfg.Lease = cfg.Lease.WithDefaults(cfg.Name)
	cfg.Lease.Name = memberLease(cfg.Name, cfg.Space.Slots, cfg.Lease.Identity)
	if err := cfg.Lease.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("shard group %q: %w", cfg.Name, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg, client: client, log: log, held: map[int]bool{}}
	member, err := leader.NewElector(
		g.cfg.Lease,
		g.client,
		leader.Recampaign,
		g.log.WithName("member"),
	)
	if err != nil {
		return nil, err
	}
	g.member = member
	return g, nil
}

// memberPrefix starts the member Lease names of the members that cut the
// key space into slots: members that disagree on it see each other.
func memberPrefix(
	group string,
	slots int,
) string {
	return fmt.Sprintf("%s-member-s%d-", group, slots)
}

func memberLease(group string, slots int, identity string) string {
	h := fnv.New64a()
	h.Write([]byte(identity))
	return fmt.Sprintf("%s%016x", memberPrefix(group, slots), h.Sum64())
}

func slotLease(group string, slot int) string { return fmt.Sprintf("%s-slot-%d", group, slot) }

// Owns reports whether lease is one of the group's Lease names: a member
// Lease or a slot Lease, for any number of slots.
func (g *Group) Owns(lease string) bool {
	return strings.HasPrefix(lease, g.cfg.Name+"-member-") ||
		strings.HasPrefix(lease, g.cfg.Name+"-slot-")
}

// Name returns the group's name (GroupConfig.Name).
func (g *Group) Name() string { return g.cfg.Name }

// Space returns the group's key space.
func (g *Group) Space() shard.Space { return g.cfg.Space }

// Ready reports whether this replica is a working member: it holds its
// member Lease and no live member cuts the key space differently. Its
// Note (healthz) lists the slots held.
func (g *Group) Ready() error {
	g.mu.Lock()
	mismatch := g.mismatch
	g.mu.Unlock()
	switch {
	case mismatch != "":
		return errors.New(mismatch)
	case !g.member.IsLeader():
		return fmt.Errorf(
			"not (yet) a member of shard group %q: its member Lease is not held",
			g.cfg.Name,
		)
	}
	return nil
}

// Held returns the slots whose terms run now.
func (g *Group) Held() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []int
	for s, ok := range g.held {
		if ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

func (g *Group) setHeld(slot int, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held[slot] = on
}

// Run holds the member Lease and works the slots assigned to this replica
// until ctx is done. Then it tells every slot term to stop and releases the
// member Lease at once, so that the other members stand for its slots
// while they stop (each slot Lease is released only once its term has
// stopped, and only then can another member take it); Run returns once
// every slot term has stopped. A lost member Lease stops every slot, and
// the replica stands again only once they all stopped.
func (g *Group) Run(ctx context.Context, work SlotFunc) error {
	var leaving sync.WaitGroup
	err := g.member.Run(
		ctx,
		func(mctx context.Context) error { return g.serve(ctx, mctx, work, &leaving) },
	)
	leaving.Wait()
	return err
}

type slotRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// serve follows the membership and keeps one slot elector per slot this
// replica should own.
//
// When parent (Run's context) is done, serve returns without waiting for
// the slot terms it stopped: leaving waits for them, after the member Lease
// is released. When only ctx (the member term) ends, the member Lease was
// lost: serve waits, so that this replica stands for a slot again only
// once its previous term on it stopped.
func (g *Group) serve(parent, ctx context.Context, work SlotFunc, leaving *sync.WaitGroup) error {
	ms := newLeases(g.client, g.cfg.Lease.Namespace, g.cfg.Name+"-", g.cfg.Lease.Clock)
	var bg sync.WaitGroup
	defer bg.Wait()
	mctx, stopMembers := context.WithCancel(ctx)
	defer stopMembers()
	bg.Go(func() { ms.run(mctx) })

	runs := map[int]*slotRun{}
	stopAll := func() {
		for _, r := range runs {
			r.cancel()
		}
		for _, r := range runs {
			if parent.Err() != nil {
				leaving.Go(func() { <-r.done })
			} else {
				<-r.done
			}
		}
	}
	defer stopAll()

	me := g.cfg.Lease.Identity
	ended := make(chan int, g.cfg.Space.Slots)
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ms.changed:
		case slot := <-ended:
			if r, ok := runs[slot]; ok {
				select {
				case <-r.done:
					delete(runs, slot) // stood down, or failed: reconsidered below
				default:
				}
			}
		case <-timer:
		}
		if !ms.synced() {
			continue
		}
		live, next := ms.holders(memberPrefix(g.cfg.Name, g.cfg.Space.Slots))
		if !slices.Contains(live, me) {
			live = append(live, me) // this term holds our member Lease
		}
		want := Owned(Assign(live, g.cfg.Space.Slots), me)
		if others := g.otherSpaces(ms); others != "" {
			// Slot i means other keys to them: work nothing until the
			// members agree (they do the same on seeing this one).
			want = nil
			g.setMismatch(others)
		} else {
			g.setMismatch("")
		}
		for slot, r := range runs {
			if !slices.Contains(want, slot) {
				r.cancel() // the term stops, then the Lease is released
			}
		}
		for _, slot := range want {
			g.clearExpired(ctx, ms, slot)
			if _, ok := runs[slot]; ok {
				continue
			}
			runs[slot] = g.startSlot(ctx, slot, work, ended)
		}
		if _, slotNext := ms.holders(g.cfg.Name + "-slot-"); !slotNext.IsZero() &&
			(next.IsZero() || slotNext.Before(next)) {
			next = slotNext
		}
		timer = nil
		if !next.IsZero() {
			timer = g.cfg.Lease.Clock.After(next.Sub(g.cfg.Lease.Clock.Now()) + 10*time.Millisecond)
		}
	}
}

// otherSpaces describes the live members that cut the key space into
// another number of slots ("" when there are none).
func (g *Group) otherSpaces(ms *leases) string {
	all, _ := ms.holders(g.cfg.Name + "-member-")
	mine, _ := ms.holders(memberPrefix(g.cfg.Name, g.cfg.Space.Slots))
	var others []string
	for _, h := range all {
		if !slices.Contains(mine, h) {
			others = append(others, h)
		}
	}
	if len(others) == 0 {
		return ""
	}
	return fmt.Sprintf(
		"shard group %q: members %v cut the key space into another number of slots than this replica's "+
			"%d; working no slot until every member runs with the same --shard-slots",
		g.cfg.Name,
		others,
		g.cfg.Space.Slots,
	)
}

func (g *Group) setMismatch(why string) {
	g.mu.Lock()
	changed := g.mismatch != why
	g.mismatch = why
	g.mu.Unlock()
	if changed && why != "" {
		g.log.Error(errors.New(why), "Members disagree on the key space")
	}
}

// clearExpired releases slot's Lease on its holder's behalf when this
// replica saw it unchanged for its whole duration: its holder crashed or
// lost its member Lease. The update carries the resourceVersion seen, so
// it fails if the holder renewed meanwhile. This replica's slot elector,
// which watches the Lease, then takes it at once, instead of waiting a
// second duration from its own first look at the Lease.
func (g *Group) clearExpired(ctx context.Context, ms *leases, slot int) {
	le, ok := ms.expired(slotLease(g.cfg.Name, slot))
	if !ok || (le.Spec.HolderIdentity != nil && *le.Spec.HolderIdentity == g.cfg.Lease.Identity) {
		return
	}
	freed := le.DeepCopy()
	freed.Spec.HolderIdentity = nil
	if _, err := g.client.CoordinationV1().Leases(le.Namespace).Update(ctx, freed,
		metav1.UpdateOptions{}); err != nil {
		g.log.V(1).
			Info("Could not release an expired slot Lease; its elector will take it when it "+
				"expires by its own reckoning",
				"slot", slot, "err", err.Error())
		return
	}
	g.log.Info(
		"Released an expired slot Lease",
		"slot",
		slot,
		"holder",
		ptrString(le.Spec.HolderIdentity),
	)
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// startSlot campaigns for slot's Lease and runs work while holding it.
func (g *Group) startSlot(ctx context.Context, slot int, work SlotFunc, ended chan<- int) *slotRun {
	sctx, cancel := context.WithCancel(ctx)
	r := &slotRun{cancel: cancel, done: make(chan struct{})}
	cfg := g.cfg.Lease
	cfg.Name = slotLease(g.cfg.Name, slot)
	log := g.log.WithValues("slot", slot)
	go func() {
		defer func() {
			close(r.done)
			select {
			case ended <- slot:
			case <-ctx.Done(): // serve is returning: nobody reads
			}
		}()
		el, err := leader.NewElector(cfg, g.client, leader.Recampaign, log)
		if err != nil {
			log.Error(err, "Cannot stand for the slot")
			return
		}
		err = el.Run(sctx, func(tctx context.Context) error {
			g.setHeld(slot, true)
			defer g.setHeld(slot, false)
			log.Info("Working the slot")
			return work(tctx, slot)
		})
		if err != nil && sctx.Err() == nil {
			log.Error(err, "Slot term failed")
		}
	}()
	return r
}
