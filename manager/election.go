package manager

import (
	"context"
	"errors"

	"github.com/go-logr/logr"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/metrics"
)

// planElection builds the electors and splits the selected controllers into
// the groups that run them: without leader election, under the main lock, or
// under the migration lock. Unowned migrated controllers are skipped.
func (m *Manager) planElection(set *descriptor.Set) []error {
	var errs []error
	var migration *leader.MigrationConfig
	if m.opts.LeaderElect {
		cfg := m.opts.LeaderElection.WithDefaults(m.component)
		m.mainLease = cfg.Name
		e, err := leader.NewElector(cfg, m.client, m.opts.LostLeasePolicy, m.log.WithName("leader-election"))
		if err != nil {
			errs = append(errs, err)
		}
		m.elector = e
		if m.opts.EnableLeaderMigration {
			migration, err = m.migrationConfig(set)
			if err != nil {
				errs = append(errs, err)
			} else {
				m.migLease = migration.LeaderName
				me, err := leader.NewElector(migration.ElectorConfig(cfg), m.client, m.opts.LostLeasePolicy, m.log.WithName("leader-migration"))
				if err != nil {
					errs = append(errs, err)
				}
				m.migElector = me
			}
		}
	}
	var selected []*state
	for _, s := range m.selected {
		d := s.desc
		switch {
		case !d.NeedsLeaderElection() || !m.opts.LeaderElect:
			if d.NeedsLeaderElection() {
				m.mainStates = append(m.mainStates, s)
			} else {
				m.unelected = append(m.unelected, s)
			}
		case migration == nil:
			s.lock = m.elector
			m.mainStates = append(m.mainStates, s)
		default:
			switch migration.Assign(m.component, d.Name(), d.Aliases()...) {
			case leader.NonMigrated:
				s.lock = m.elector
				m.mainStates = append(m.mainStates, s)
			case leader.Migrated:
				s.lock = m.migElector
				m.migStates = append(m.migStates, s)
			case leader.Unowned:
				s.skip("leader migration: run by another component under lock " + migration.LeaderName)
				continue
			}
		}
		selected = append(selected, s)
	}
	m.selected = selected
	return errs
}

// migrationConfig reads, validates and checks the migration configuration.
func (m *Manager) migrationConfig(set *descriptor.Set) (*leader.MigrationConfig, error) {
	if m.opts.LeaderMigrationConfig == "" {
		// KCM's default names cloud controllers a given manager may not
		// have; entries for unknown controllers simply match nothing.
		return leader.DefaultMigrationConfig(m.component), nil
	}
	cfg, err := leader.ReadMigrationConfig(m.opts.LeaderMigrationConfig)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.UnknownControllers(func(name string) bool { _, ok := set.Get(name); return ok }); err != nil {
		return nil, err
	}
	return cfg, nil
}

// IsLeader reports whether this replica holds the main lock. Without leader
// election it is true while Run runs.
func (m *Manager) IsLeader() bool {
	if m.elector == nil {
		return m.running.Load()
	}
	return m.elector.IsLeader()
}

// Elected is closed the first time this replica leads (without leader
// election: when Run starts).
func (m *Manager) Elected() <-chan struct{} {
	if m.elector == nil {
		return m.started
	}
	return m.elector.Elected()
}

// Leader returns the identity of the main lock's holder as last observed,
// and this replica's identity. Both are "" without leader election.
func (m *Manager) Leader() (holder, self string) {
	if m.elector == nil {
		return "", ""
	}
	return m.elector.Leader(), m.elector.Identity()
}

// runElected campaigns on e and runs spec as a term whenever it leads.
// A term whose controllers did not stop in time ends the campaign: standing
// again while they may still act would let two replicas act at once.
func (m *Manager) runElected(ctx context.Context, e *leader.Elector, lease string, spec termSpec) error {
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	// client-go leaves leader_election_master_status at 1 when its elector
	// ends by cancellation; this replica leads nothing once Run returns.
	defer metrics.LeaderStatus(lease, false)
	var fatal error
	err := e.Run(ectx, func(tctx context.Context) error {
		err := m.runTerm(tctx, spec)
		if errors.Is(err, ErrShutdownTimeout) && ctx.Err() == nil {
			fatal = err
			cancel()
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
// holds it. It ends with the main term, so the migration lock is never held
// without the main one, and is sought again only in the next main term.
func (m *Manager) migrationCampaign(ctx context.Context) error {
	logr.FromContextOrDiscard(ctx).Info("Main lock held and StartFirst controllers running; seeking the migration lock")
	return m.runElected(ctx, m.migElector, m.migLease, termSpec{name: "migration", states: m.migStates})
}
