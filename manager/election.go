package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/metrics"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/shard"
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

// planElection builds the electors and splits the selected controllers into
// the groups that run them: without leader election, under the main lock, or
// under the migration lock. Unowned migrated controllers are skipped. A
// component none of whose controllers is migrated does not seek the
// migration lock at all (KCM does, and then holds it for nothing, keeping it
// from the component that runs the migrated controllers).
func (m *Manager) planElection(set *descriptor.Set) []error {
	var errs []error
	var migration *leader.MigrationConfig
	var cfg leader.Config
	p := &m.locks
	for _, w := range m.opts.warnings() {
		m.log.Info("Warning: " + w)
	}
	if m.opts.LeaderElect {
		cfg = m.opts.LeaderElection.WithDefaults(m.component)
		p.main.lease = cfg.Name
		e, err := leader.NewElector(cfg, m.client, m.opts.LostLeasePolicy,
			m.log.WithName("leader-election"))
		if err != nil {
			errs = append(errs, err)
		}
		p.main.elector = e
		if m.opts.EnableLeaderMigration {
			if migration, err = m.migrationConfig(set); err != nil {
				errs = append(errs, err)
			}
		}
	}
	var selected []*state
	sharded := map[shard.Keying][]*state{}
	for _, s := range m.selected {
		d := s.desc
		keying, isSharded := d.IsSharded()
		isSharded = isSharded && m.opts.LeaderElect && m.opts.Sharding.Enabled
		if isSharded && !s.enabled.Load() {
			// Shard groups are made at Build for the selected controllers.
			s.fixed = "sharded (--enable-sharding) and not selected when the Manager was built"
			continue
		}
		if isSharded && migration != nil {
			if migration.Assign(m.component, d.Name(), d.Aliases()...) != leader.NonMigrated {
				errs = append(errs, fmt.Errorf("controller %q: sharded (--enable-sharding) and named in the "+
					"leader migration configuration; its slots cannot move under the migration lock: remove it "+
					"from the file or run without --enable-sharding", d.Name()))
				continue
			}
		}
		switch {
		case isSharded:
			sharded[keying] = append(sharded[keying], s)
		case !d.NeedsLeaderElection() || !m.opts.LeaderElect:
			if d.NeedsLeaderElection() {
				p.main.states = append(p.main.states, s)
			} else {
				p.unelected = append(p.unelected, s)
			}
		case migration == nil:
			s.lock = p.main.elector
			p.main.states = append(p.main.states, s)
		default:
			switch migration.Assign(m.component, d.Name(), d.Aliases()...) {
			case leader.NonMigrated:
				s.lock = p.main.elector
				p.main.states = append(p.main.states, s)
			case leader.Migrated:
				p.migration.states = append(p.migration.states, s)
			case leader.Unowned:
				reason := "leader migration: run by another component under lock " +
					migration.LeaseName()
				if s.enabled.Load() {
					s.skip(reason)
				}
				// SetControllers may neither stop nor start it: it is not
				// this component's to run.
				s.fixed = reason
				continue
			}
		}
		selected = append(selected, s)
	}
	m.selected = selected
	errs = append(errs, m.planShards(cfg, sharded)...)
	if migration == nil {
		return errs
	}
	if err := m.lockNamesDiffer(cfg, migration.ElectorConfig(cfg)); err != nil {
		return append(errs, err)
	}
	if !slices.ContainsFunc(p.migration.states, func(s *state) bool { return s.enabled.Load() }) {
		// Controllers selected only later cannot make this component seek
		// the lock: it would keep it from the component that runs them.
		for _, s := range p.migration.states {
			s.fixed = "migrated (leader migration), and this component seeks no migration lock: " +
				"none of its migrated controllers was selected when the Manager was built"
		}
		p.migration.states = nil
		m.log.Info("Leader migration: no controller of this component is migrated; not "+
			"seeking the migration lock", "lease", migration.LeaseName())
		return errs
	}
	p.migration.lease = migration.LeaseName()
	me, err := leader.NewElector(migration.ElectorConfig(cfg), m.client, m.opts.LostLeasePolicy,
		m.log.WithName("leader-migration"))
	if err != nil {
		return append(errs, err)
	}
	p.migration.elector = me
	for _, s := range p.migration.states {
		s.lock = me
	}
	return errs
}

// lockNamesDiffer checks that the migration lock is none of the
// component's other locks: the main Lease, or a shard group's member and
// slot Leases. Two locks of one name would be held by two replicas at
// once, each believing it leads.
func (m *Manager) lockNamesDiffer(main, migration leader.Config) error {
	if migration.Namespace != main.Namespace {
		return nil
	}
	name := migration.Name
	switch {
	case name == main.Name:
		return fmt.Errorf("--leader-migration-config %q: leaderName %q is also the main lock's name "+
			"(--leader-elect-resource-name): two locks of one name let two replicas lead at once; "+
			"give the migration lock a name of its own", m.opts.LeaderMigrationConfig, name)
	}
	for _, p := range m.locks.shards {
		if p.group.Owns(name) {
			return fmt.Errorf("--leader-migration-config %q: leaderName %q is a Lease of shard group %q "+
				"(--enable-sharding): two locks of one name let two replicas lead at once; "+
				"give the migration lock a name of its own", m.opts.LeaderMigrationConfig, name, p.group.Name())
		}
	}
	return nil
}

// migrationConfig reads and validates the migration configuration, and logs
// what KCM accepts but is likely a mistake.
func (m *Manager) migrationConfig(set *descriptor.Set) (*leader.MigrationConfig, error) {
	cfg := leader.DefaultMigrationConfig(m.component)
	if m.opts.LeaderMigrationConfig != "" {
		var err error
		if cfg, err = leader.ReadMigrationConfig(m.opts.LeaderMigrationConfig); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	known := func(name string) bool { _, ok := set.Get(name); return ok }
	for _, w := range cfg.Warnings(known) {
		m.log.Info("Warning: leader migration configuration: "+w, "file", m.opts.LeaderMigrationConfig)
	}
	return cfg, nil
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
func (m *Manager) runElected(ctx context.Context, g lockGroup, spec termSpec) error {
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
	warm := m.newWarmSlot(ectx, spec.states, lease)
	warm.put(warm.prepare(ectx))
	defer warm.stop()
	if m.opts.WarmStandby {
		var following sync.WaitGroup
		defer following.Wait()
		defer cancel()
		following.Go(func() { warm.follow(ectx) })
	}
	err := e.Run(ectx, func(tctx context.Context) error {
		s := spec
		s.warm = warm.take()
		err := m.runTerm(tctx, s)
		if errors.Is(err, ErrShutdownTimeout) && ctx.Err() == nil {
			fatal = err
			cancel()
		}
		// The campaign goes on only after the lease was lost (the term's
		// context ends while Run's does not); a term that returned on its
		// own ends Run, and a set prepared then would list for nothing.
		if m.opts.LostLeasePolicy == leader.Recampaign && tctx.Err() != nil && ectx.Err() == nil {
			warm.put(warm.prepare(ectx))
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
	return m.runElected(ctx, m.locks.migration, termSpec{name: "migration",
		states: m.locks.migration.states,
		parent: leader.TermFrom(ctx)})
}
