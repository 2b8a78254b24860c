package manager

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/selection"
	"github.com/ctrlhost/ctrlhost/shard"
)

const planMigration = `apiVersion: controllermanager.config.k8s.io/v1
kind: LeaderMigrationConfiguration
leaderName: plan-migration
controllerLeaders:
- name: migrated
  component: my-manager
- name: elsewhere
  component: other-manager
- name: unknown-controller
  component: my-manager
`

// TestNewPlanSplitsTheControllers: newPlan puts each selected controller
// in the group that runs it, gives the groups' controllers their lock,
// makes what it would log notes, and logs nothing itself.
func TestNewPlanSplitsTheControllers(t *testing.T) {
	file := filepath.Join(t.TempDir(), "migration.yaml")
	if err := os.WriteFile(file, []byte(planMigration), 0o600); err != nil {
		t.Fatal(err)
	}
	elected := func(o Options) Options {
		o.LeaderElect = true
		return o
	}
	for _, tc := range []struct {
		name                       string
		opts                       Options
		main, unelected, migration []string
		shards                     []string
		skipped                    []string
		notes                      []string // substrings, in order
	}{{
		name:      "without leader election",
		opts:      Options{EnableLeaderMigration: true},
		main:      []string{"main", "migrated", "elsewhere", "sharded"},
		unelected: []string{"unelected"},
		notes:     []string{"--enable-leader-migration is ignored"},
	}, {
		name:      "elected",
		opts:      elected(Options{}),
		main:      []string{"main", "migrated", "elsewhere", "sharded"},
		unelected: []string{"unelected"},
	}, {
		name:      "sharded",
		opts:      elected(Options{Sharding: shard.Options{Enabled: true, Slots: 4}}),
		main:      []string{"main", "migrated", "elsewhere"},
		unelected: []string{"unelected"},
		shards:    []string{"sharded"},
	}, {
		name: "migration",
		opts: elected(Options{EnableLeaderMigration: true, LeaderMigrationConfig: file}),
		main: []string{"main", "sharded"}, unelected: []string{"unelected"},
		migration: []string{"migrated"},
		skipped:   []string{"elsewhere"},
		notes:     []string{"unknown-controller"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var logged []string
			log := funcr.New(func(prefix, args string) { logged = append(logged, args) },
				funcr.Options{})
			ds := []descriptor.Descriptor{
				descriptor.New("main", nopInit),
				descriptor.New("unelected", nopInit).WithoutLeaderElection(),
				descriptor.New("migrated", nopInit),
				descriptor.New("elsewhere", nopInit),
				descriptor.New("sharded", nopInit).Sharded(shard.ByNamespace),
			}
			set, err := descriptor.NewSet(ds...)
			if err != nil {
				t.Fatal(err)
			}
			controllers, _ := selection.Resolve(ds, []string{"*"})
			opts := tc.opts.WithDefaults()
			p, errs := newPlan(planInput{component: "my-manager", opts: opts, set: set,
				controllers: controllers, client: fake.NewClientset(), log: log})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			names := func(states []*state) []string {
				var out []string
				for _, s := range states {
					out = append(out, s.Desc.Name())
				}
				return out
			}
			var sharded []string
			for _, g := range p.locks.shards {
				sharded = append(sharded, names(g.states)...)
			}
			for _, c := range []struct {
				group     string
				got, want []string
			}{
				{"main", names(p.locks.main.states), tc.main},
				{"unelected", names(p.locks.unelected), tc.unelected},
				{"migration", names(p.locks.migration.states), tc.migration},
				{"shard groups", sharded, tc.shards},
			} {
				if !slices.Equal(c.got, c.want) {
					t.Errorf("%s runs %v, want %v", c.group, c.got, c.want)
				}
			}
			for _, s := range p.locks.main.states {
				if s.lock != p.locks.main.elector {
					t.Errorf("%s: not given the main lock's elector", s.Desc.Name())
				}
			}
			for _, s := range p.locks.migration.states {
				if s.lock == nil || s.lock != p.locks.migration.elector {
					t.Errorf("%s: not given the migration lock's elector", s.Desc.Name())
				}
			}
			for _, name := range tc.skipped {
				st, _ := p.states[name].status()
				if st.Phase != PhaseSkipped || p.states[name].fixed == "" ||
					slices.Contains(p.selected, p.states[name]) {
					t.Errorf("%s: %s, fixed %q; want skipped, fixed, not selected", name, st.Phase,
						p.states[name].fixed)
				}
			}
			if len(p.notes) != len(tc.notes) {
				t.Errorf("notes %v, want %d", p.notes, len(tc.notes))
			}
			for i, want := range tc.notes {
				if i < len(p.notes) && !strings.Contains(p.notes[i].msg, want) {
					t.Errorf("note %d %q, want it to say %q", i, p.notes[i].msg, want)
				}
			}
			if len(logged) > 0 {
				t.Errorf("planning logged %q; it should only note", logged)
			}
		})
	}
}
