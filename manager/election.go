package manager

import (
	"context"
	"errors"
	"sync"

	"github.com/go-logr/logr"

	"github.com/ctrlhost/ctrlhost/internal/metrics"
	"github.com/ctrlhost/ctrlhost/internal/term"
	"github.com/ctrlhost/ctrlhost/leader"
)

// lockPlan says which lock runs which selected controllers.
type lockPlan struct {
	unelected []*state    // WithoutLeaderElection: one term for all of Run
	main      lockGroup   // the main lock; elector nil without leader election
	migration lockGroup   // elector nil unless this replica seeks the migration lock
	shards    []shardPlan // sharded controllers, by shard group (Options.Sharding)
}

// lockGroup is one lock and the controllers its terms run.
type lockGroup struct {
	elector *leader.Elector
	lease   string // for metrics
	states  []*state
}

// IsLeader reports whether this replica holds the main lock. Without leader
// election it is true while Run runs.
func (m *Manager) IsLeader() bool {
	if m.locks.main.elector == nil {
		return m.running.Load()
	}
	return m.locks.main.elector.IsLeader()
}

// Elected is closed the first time this replica leads (without leader
// election: when Run starts).
func (m *Manager) Elected() <-chan struct{} {
	if m.locks.main.elector == nil {
		return m.started
	}
	return m.locks.main.elector.Elected()
}

// Leader returns the identity of the main lock's holder as last observed,
// and this replica's identity. Both are "" without leader election.
func (m *Manager) Leader() (holder, self string) {
	e := m.locks.main.elector
	if e == nil {
		return "", ""
	}
	return e.Leader(), e.Identity()
}

// runElected campaigns on e and runs spec as a term whenever it leads.
// A term whose controllers did not stop in time ends the campaign: standing
// again while they may still act would let two replicas act at once.
func (m *Manager) runElected(ctx context.Context, g lockGroup, spec term.Spec) error {
	e, lease := g.elector, g.lease
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	// client-go leaves leader_election_master_status at 1 when its elector
	// ends by cancellation; this replica leads nothing once Run returns.
	defer metrics.LeaderStatus(lease, false)
	var fatal error
	// Under warm standby the follower keeps its would-be term's informers
	// synced; the next term adopts them, and a new set is prepared only if
	// this replica stands again (the recampaign policy). A change of
	// selection, or of the WhenServed controllers' resources, while
	// following prepares the set anew (warm.follow).
	warm := m.host.NewWarmSlot(ectx, spec.States, lease)
	warm.Put(warm.Prepare(ectx))
	defer warm.Stop()
	if m.opts.WarmStandby {
		var following sync.WaitGroup
		defer following.Wait()
		defer cancel()
		following.Go(func() { warm.Follow(ectx) })
	}
	err := e.Run(ectx, func(tctx context.Context) error {
		s := spec
		s.Warm = warm.Take()
		err := m.host.Run(tctx, s)
		if errors.Is(err, ErrShutdownTimeout) && ctx.Err() == nil {
			fatal = err
			cancel()
		}
		// The campaign goes on only after the lease was lost (the term's
		// context ends while Run's does not); a term that returned on its
		// own ends Run, and a set prepared then would list for nothing.
		if m.opts.LostLeasePolicy == leader.Recampaign && tctx.Err() != nil && ectx.Err() == nil {
			warm.Put(warm.Prepare(ectx))
		}
		return err
	})
	if fatal != nil && !errors.Is(err, ErrShutdownTimeout) {
		err = errors.Join(err, fatal)
	}
	return err
}

// migrationCampaign is the main term's alongside function under leader
// migration: it seeks the migration lock once the main lock is held and the
// StartFirst controllers run, and runs the migrated controllers while it
// holds it. It ends with the main term, so the migration lock is sought
// again only in the next main term; the migration term stops when the main
// term's controllers do, within what is left of the main lease's stop
// budget as well as its own, and the main term returns (releasing the main
// lock) only after it ended.
func (m *Manager) migrationCampaign(ctx context.Context) error {
	logr.FromContextOrDiscard(ctx).Info("Main lock held and StartFirst controllers running; " +
		"seeking the migration lock")
	return m.runElected(ctx, m.locks.migration, term.Spec{Name: "migration",
		States: records(m.locks.migration.states), Parent: leader.TermFrom(ctx)})
}
