package manager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/dynamic"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/healthz"
	"github.com/ctrlhost/ctrlhost/internal/shardgroup"
	"github.com/ctrlhost/ctrlhost/internal/term"
	"github.com/ctrlhost/ctrlhost/shard"
)

// shardPlan is one shard group and the sharded controllers every slot
// term of it runs.
type shardPlan struct {
	group  *shardgroup.Group
	states []*state
}

// shardGroupName names the shard group of keying under the main Lease's
// name: its Leases are "<name>-member-…" and "<name>-slot-<i>".
func shardGroupName(lease string, k shard.Keying) string {
	if k == shard.ByUID {
		return lease + "-shard-uid"
	}
	return lease + "-shard"
}

// runShards is this replica's membership in p's group: every slot it
// holds is a term of p's controllers over informers that hold only the
// slot's objects. A slot term that fails (a controller failed, or did not
// stop in time) ends Run, as the main term does.
func (m *Manager) runShards(ctx context.Context, p shardPlan) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var failed []error
	name, space := p.group.Name(), p.group.Space()
	limiters := shardgroup.NewLimiters()
	scope := shardgroup.DiscoveryScope(m.clients.Client.Discovery())
	err := p.group.Run(ctx, func(sctx context.Context, slot int) error {
		client, err := shardgroup.NewClientset(m.clients.Client, space, []int{slot})
		if err != nil {
			return err // a bad slot number: a bug, and the term would be empty
		}
		var dyn dynamic.Interface
		if m.clients.Dynamic != nil {
			if dyn, err = shardgroup.NewDynamic(m.clients.Dynamic, space, []int{slot}, scope); err != nil {
				return err
			}
		}
		states := make([]*term.State, len(p.states))
		for i, s := range p.states {
			states[i] = s.ForSlot(slot)
		}
		m.metrics.SlotHeld(name, slot, true)
		defer func() {
			m.metrics.SlotHeld(name, slot, false)
			for _, s := range p.states {
				s.DropSlot(slot)
			}
		}()
		err = m.host.Run(sctx, term.Spec{Name: fmt.Sprintf("%s-slot-%d", name, slot), States: states,
			Slot: &term.Slot{Client: client, Dynamic: dyn, Limiters: limiters, Space: space,
				Index: slot}})
		if err != nil {
			mu.Lock()
			failed = append(failed, fmt.Errorf("shard group %q, slot %d: %w", name, slot, err))
			mu.Unlock()
			cancel()
		}
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(append(failed, err)...)
}

// shardingCheck is CheckSharding's checker.
func (m *Manager) shardingCheck(*http.Request) error {
	var errs []error
	var notes []string
	for _, p := range m.locks.shards {
		if err := p.group.Ready(); err != nil {
			errs = append(errs, err)
			continue
		}
		notes = append(notes, fmt.Sprintf("group %s: slots %v of %d", p.group.Name(), p.group.Held(),
			p.group.Space().Slots))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return healthz.Note(fmt.Sprint(notes))
}

// shardedCheck is a sharded controller's check. A replica is ready for it
// while it is a working member of the group and none of its slot terms'
// instances failed or reports itself unready while running: an instance
// that is still starting, or stopping because its slot moved, is shown in
// /readyz?verbose but fails nothing, so that readiness does not flap while
// slots change hands (a rebalance is not a reason to take a replica out of
// service). Liveness fails only for a failed instance.
func (m *Manager) shardedCheck(s *state, readiness bool, req *http.Request) error {
	slots := s.SlotStates()
	if readiness {
		if err := s.group.Ready(); err != nil {
			return err
		}
	}
	if len(slots) == 0 {
		if readiness {
			return healthz.Note("works no slot on this replica")
		}
		return nil
	}
	var errs []error
	var running []int
	var notes []string
	for _, slot := range slices.Sorted(maps.Keys(slots)) {
		ts, c := slots[slot].Snapshot()
		st := publicStatus(ts)
		var err error
		switch st.Phase {
		case PhaseFailed:
			err = st.Err
		case PhaseRunning:
			live, ready := descriptor.HealthChecks(c)
			if readiness {
				err = ready(req)
			} else {
				err = live(req)
			}
		}
		switch {
		case !healthz.Passed(err):
			errs = append(errs, fmt.Errorf("slot %d: %w", slot, err))
		case st.Phase == PhaseRunning:
			running = append(running, slot)
		default:
			notes = append(notes, fmt.Sprintf("slot %d %s", slot, st.Phase))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	note := fmt.Sprintf("slots %v", running)
	if len(notes) > 0 {
		note += " (" + strings.Join(notes, ", ") + ")"
	}
	return healthz.Note(note)
}
