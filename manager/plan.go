package manager

import (
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/selection"
	"github.com/ctrlhost/ctrlhost/internal/shardgroup"
	"github.com/ctrlhost/ctrlhost/internal/term"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/shard"
)

// plan is what Build makes of the descriptors, the options and the
// clients: every controller's state, the selected ones, which lock runs
// which, and what Build logs about it. newPlan makes it without logging
// and without a Manager, so that each rule of planning is read, and
// tested, in one place.
type plan struct {
	order    []*state          // every registered controller, registration order
	states   map[string]*state // by canonical name
	selected []*state          // enabled and not skipped, registration order
	locks    lockPlan
	notes    []logLine // logged by Build once the Manager is made
}

// logLine is one line for Build to log.
type logLine struct {
	msg string
	kv  []any
}

// planInput is what planning reads.
type planInput struct {
	component   string
	opts        Options // defaulted
	set         *descriptor.Set
	controllers selection.Selection // --controllers, resolved
	featureGate featuregate.FeatureGate
	cloud       selection.Cloud
	// client is the client of the Leases; nil when the clients could not
	// be made: no lock is planned then.
	client     kubernetes.Interface
	restConfig *rest.Config // nil when built WithClient
	// log is given to the electors and shard groups, which log while they
	// run; planning itself writes nothing to it.
	log logr.Logger
}

// newPlan plans a Manager: the state of every descriptor of in.set (none
// when the set is nil: the registry was invalid), then, with a client, the
// locks. The errors are every problem found; the plan is usable only
// without them.
func newPlan(in planInput) (*plan, []error) {
	p := &plan{states: map[string]*state{}}
	for _, w := range in.opts.warnings() {
		p.note("Warning: " + w)
	}
	if in.set == nil {
		return p, nil
	}
	errs := p.addStates(in)
	if in.client != nil {
		errs = append(errs, p.planLocks(in)...)
	}
	return p, errs
}

func (p *plan) note(msg string, kv ...any) { p.notes = append(p.notes, logLine{msg, kv}) }

// addStates makes every controller's state: disabled (not selected by
// --controllers; fixed when it could not run if selected), skipped
// (feature gate, cloud), or waiting and selected.
func (p *plan) addStates(in planInput) []error {
	var errs []error
	for _, d := range in.set.All() {
		st := newState(d, PhaseWaiting, "")
		reason, err := selection.Skip(d, in.featureGate, in.cloud)
		if err != nil {
			errs = append(errs, err)
		}
		switch {
		case !in.controllers.Enabled(d):
			st = newState(d, PhaseDisabled, "not selected by "+in.opts.flagName("controllers"))
			if reason != "" {
				// It could not run even if selected at runtime.
				st.fixed = reason
			} else {
				p.selected = append(p.selected, st)
			}
		case reason != "":
			st = newState(d, PhaseSkipped, reason)
		default:
			p.selected = append(p.selected, st)
		}
		p.states[d.Name()] = st
		p.order = append(p.order, st)
	}
	return errs
}

// planLocks builds the electors and splits the selected controllers into
// the groups that run them: without leader election, under the main lock,
// in a shard group, or under the migration lock. Unowned migrated
// controllers are skipped. A component none of whose controllers is
// migrated does not seek the migration lock at all (KCM does, and then
// holds it for nothing, keeping it from the component that runs the
// migrated controllers).
func (p *plan) planLocks(in planInput) []error {
	var errs []error
	var migration *leader.MigrationConfig
	var cfg leader.Config
	if in.opts.LeaderElect {
		cfg = in.opts.LeaderElection.WithDefaults(in.component)
		p.locks.main.lease = cfg.Name
		e, err := leader.NewElector(cfg, in.client, in.opts.LostLeasePolicy,
			in.log.WithName("leader-election"))
		if err != nil {
			errs = append(errs, err)
		}
		p.locks.main.elector = e
		if in.opts.EnableLeaderMigration {
			if migration, err = p.migrationConfig(in); err != nil {
				errs = append(errs, err)
			}
		}
	}
	sharded, serrs := p.assignLocks(in, migration)
	errs = append(errs, serrs...)
	errs = append(errs, p.planShards(in, cfg, sharded)...)
	if migration != nil {
		errs = append(errs, p.planMigration(in, cfg, migration)...)
	}
	for _, s := range p.locks.main.states {
		s.lock = p.locks.main.elector
	}
	for _, s := range p.locks.migration.states {
		s.lock = p.locks.migration.elector
	}
	return errs
}

// assignLocks puts each selected controller in the group that runs it,
// and returns the sharded ones by keying. Those no group of this
// component runs leave the selection, fixed.
func (p *plan) assignLocks(in planInput,
	migration *leader.MigrationConfig) (map[shard.Keying][]*state, []error) {
	var errs []error
	var selected []*state
	sharded := map[shard.Keying][]*state{}
	for _, s := range p.selected {
		d := s.Desc
		keying, isSharded := d.IsSharded()
		isSharded = isSharded && in.opts.LeaderElect && in.opts.Sharding.Enabled
		if isSharded && !s.Enabled.Load() {
			// Shard groups are made at Build for the selected controllers.
			s.fixed = "sharded (--enable-sharding) and not selected when the Manager was built"
			continue
		}
		assigned := leader.NonMigrated
		if migration != nil {
			assigned = migration.Assign(in.component, d.Name(), d.Aliases()...)
		}
		switch {
		case isSharded && assigned != leader.NonMigrated:
			errs = append(errs, fmt.Errorf("controller %q: sharded (--enable-sharding) and named in "+
				"the leader migration configuration; its slots cannot move under the migration lock: "+
				"remove it from the file or run without --enable-sharding", d.Name()))
			continue
		case isSharded:
			sharded[keying] = append(sharded[keying], s)
		case !d.NeedsLeaderElection():
			p.locks.unelected = append(p.locks.unelected, s)
		case assigned == leader.Migrated:
			p.locks.migration.states = append(p.locks.migration.states, s)
		case assigned == leader.Unowned:
			reason := "leader migration: run by another component under lock " +
				migration.LeaseName()
			if s.Enabled.Load() {
				s.Skip(reason)
			}
			// SetControllers may neither stop nor start it: it is not
			// this component's to run.
			s.fixed = reason
			continue
		default:
			p.locks.main.states = append(p.locks.main.states, s)
		}
		selected = append(selected, s)
	}
	p.selected = selected
	return sharded, errs
}

// planShards makes one shard group per keying of the sharded controllers
// in byKeying, each with the main lock's Lease settings.
func (p *plan) planShards(in planInput, cfg leader.Config,
	byKeying map[shard.Keying][]*state) []error {
	var errs []error
	for _, k := range []shard.Keying{shard.ByNamespace, shard.ByUID} {
		states := byKeying[k]
		if len(states) == 0 {
			continue
		}
		name := shardGroupName(cfg.Name, k)
		client, err := shardClient(in, cfg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		g, err := shardgroup.NewGroup(shardgroup.GroupConfig{Name: name,
			Space: shard.Space{Slots: in.opts.Sharding.Slots, Keying: k}, Lease: cfg},
			client, in.log.WithName("shard").WithValues("group", name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, s := range states {
			s.group = g
		}
		p.locks.shards = append(p.locks.shards, shardPlan{group: g, states: states})
	}
	return errs
}

// shardClient is the client of a shard group's Leases: one of its own, with
// a budget for the group's Lease traffic (shardgroup.LeaseClientConfig).
func shardClient(in planInput, cfg leader.Config) (kubernetes.Interface, error) {
	if in.restConfig == nil {
		return in.client, nil
	}
	c := shardgroup.LeaseClientConfig(term.WithUserAgent(in.restConfig, "shard"),
		in.opts.Sharding.Slots, cfg.RetryPeriod)
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("sharding: client: %w", err)
	}
	return cs, nil
}

// planMigration makes the migration lock's elector when this component
// seeks it: when one of its migrated controllers is selected now.
// Controllers selected only later cannot make it seek the lock: it would
// keep it from the component that runs them.
func (p *plan) planMigration(in planInput, cfg leader.Config,
	migration *leader.MigrationConfig) []error {
	if err := p.lockNamesDiffer(in, cfg, migration.ElectorConfig(cfg)); err != nil {
		return []error{err}
	}
	enabled := func(s *state) bool { return s.Enabled.Load() }
	if !slices.ContainsFunc(p.locks.migration.states, enabled) {
		for _, s := range p.locks.migration.states {
			s.fixed = "migrated (leader migration), and this component seeks no migration lock: " +
				"none of its migrated controllers was selected when the Manager was built"
		}
		p.locks.migration.states = nil
		p.note("Leader migration: no controller of this component is migrated; not "+
			"seeking the migration lock", "lease", migration.LeaseName())
		return nil
	}
	p.locks.migration.lease = migration.LeaseName()
	me, err := leader.NewElector(migration.ElectorConfig(cfg), in.client, in.opts.LostLeasePolicy,
		in.log.WithName("leader-migration"))
	if err != nil {
		return []error{err}
	}
	p.locks.migration.elector = me
	return nil
}

// lockNamesDiffer checks that the migration lock is none of the
// component's other locks: the main Lease, or a shard group's member and
// slot Leases. Two locks of one name would be held by two replicas at
// once, each believing it leads.
func (p *plan) lockNamesDiffer(in planInput, main, migration leader.Config) error {
	if migration.Namespace != main.Namespace {
		return nil
	}
	name, file := migration.Name, in.opts.LeaderMigrationConfig
	if name == main.Name {
		return fmt.Errorf("--leader-migration-config %q: leaderName %q is also the main lock's name "+
			"(--leader-elect-resource-name): two locks of one name let two replicas lead at once; "+
			"give the migration lock a name of its own", file, name)
	}
	for _, s := range p.locks.shards {
		if s.group.Owns(name) {
			return fmt.Errorf("--leader-migration-config %q: leaderName %q is a Lease of shard group "+
				"%q (--enable-sharding): two locks of one name let two replicas lead at once; "+
				"give the migration lock a name of its own", file, name, s.group.Name())
		}
	}
	return nil
}

// migrationConfig reads and validates the migration configuration, and
// notes what KCM accepts but is likely a mistake.
func (p *plan) migrationConfig(in planInput) (*leader.MigrationConfig, error) {
	cfg := leader.DefaultMigrationConfig(in.component)
	if in.opts.LeaderMigrationConfig != "" {
		var err error
		if cfg, err = leader.ReadMigrationConfig(in.opts.LeaderMigrationConfig); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	known := func(name string) bool { _, ok := in.set.Get(name); return ok }
	for _, w := range cfg.Warnings(known) {
		p.note("Warning: leader migration configuration: "+w, "file", in.opts.LeaderMigrationConfig)
	}
	return cfg, nil
}
