package manager_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/leader/leadertest"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/managertest"
	"github.com/ctrlhost/ctrlhost/serving"
	"github.com/ctrlhost/ctrlhost/shard"
)

// fastElection keeps unit tests quick: valid, KCM-shaped, but small.
func fastElection(identity string) manager.Options {
	return manager.Options{
		Serving:     serving.Options{SecurePort: -1},
		LeaderElect: true,
		LeaderElection: leader.Config{
			Identity: identity,
			// Short, yet with room for a loaded 2-core machine under -race:
			// a renewal must not miss its deadline by scheduling delays.
			LeaseDuration: 3 * time.Second,
			RenewDeadline: 1400 * time.Millisecond,
			RetryPeriod:   300 * time.Millisecond,
		},
	}
}

// activity records when each replica's copy of a controller ran.
type activity struct {
	mu        sync.Mutex
	intervals []interval
	active    map[string]int
}

type interval struct {
	replica    string
	start, end time.Time
}

func (a *activity) controller(name, replica string) descriptor.Descriptor {
	return descriptor.New(name, func(context.Context, descriptor.Context) (descriptor.Controller, error) {
		return descriptor.ControllerFunc(func(ctx context.Context) error {
			a.mu.Lock()
			a.active[replica]++
			i := len(a.intervals)
			a.intervals = append(a.intervals, interval{replica: replica, start: time.Now()})
			a.mu.Unlock()
			<-ctx.Done()
			a.mu.Lock()
			a.active[replica]--
			a.intervals[i].end = time.Now()
			a.mu.Unlock()
			return nil
		}), nil
	})
}

// leaders returns the replicas running the controller now.
func (a *activity) leaders() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for r, n := range a.active {
		if n > 0 {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// assertNoOverlap checks that no two replicas ever ran at once.
func (a *activity) assertNoOverlap(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	iv := slices.Clone(a.intervals)
	slices.SortFunc(iv, func(x, y interval) int { return x.start.Compare(y.start) })
	for i := 1; i < len(iv); i++ {
		prev := iv[i-1]
		if prev.end.IsZero() || iv[i].start.Before(prev.end) {
			t.Errorf("%s started at %v while %s ran (%v–%v)", iv[i].replica, iv[i].start, prev.replica, prev.start, prev.end)
		}
	}
}

// recv receives from c, failing the test after managertest.DefaultTimeout.
func recv[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(managertest.DefaultTimeout):
		t.Fatalf("timed out after %v waiting for %s", managertest.DefaultTimeout, what)
		var zero T
		return zero
	}
}

// TestLeaderElectionHandsOver: three replicas share one API; exactly one
// runs the leader-elected controller at a time, every replica runs the
// WithoutLeaderElection one, and stopping the leader hands over.
func TestLeaderElectionHandsOver(t *testing.T) {
	act := &activity{active: map[string]int{}}
	every := &activity{active: map[string]int{}}
	var hs []*managertest.Harness
	for i := range 3 {
		replica := fmt.Sprintf("replica-%d", i)
		h := managertest.New(t, "ha-manager", []descriptor.Descriptor{
			act.controller("elected-controller", replica),
			every.controller("everywhere-controller", replica).WithoutLeaderElection(),
		})
		if i == 0 {
			leadertest.EnforceResourceVersion(h.Client)
		} else {
			h.Share(hs[0])
		}
		h.Options = fastElection(replica)
		hs = append(hs, h.Start())
	}
	managertest.Eventually(t, "a leader", func() bool { return len(act.leaders()) == 1 })
	managertest.Eventually(t, "the unelected controller on every replica", func() bool { return len(every.leaders()) == 3 })
	first := act.leaders()[0]
	var leaderH *managertest.Harness
	for i, h := range hs {
		replica := fmt.Sprintf("replica-%d", i)
		if replica == first {
			leaderH = h
			if !h.Manager.IsLeader() {
				t.Errorf("%s runs the controller but IsLeader is false", replica)
			}
			continue
		}
		if h.Manager.IsLeader() {
			t.Errorf("%s is not running the controller but IsLeader is true", replica)
		}
		h.WaitHealthy("/readyz") // a follower that knows its leader is ready
		if _, body := h.Get("/readyz?verbose"); !strings.Contains(body, "[+]leader-election ok: following "+first+" as "+replica) {
			t.Errorf("%s: /readyz?verbose does not show the role:\n%s", replica, body)
		}
		if holder, self := h.Manager.Leader(); holder != first || self != replica {
			t.Errorf("%s sees leader %q (self %q), want %q", replica, holder, self, first)
		}
		if st, _ := h.Manager.Status("elected-controller"); st.Phase != manager.PhaseWaiting {
			t.Errorf("%s: follower's controller is %s, want waiting", replica, st.Phase)
		}
	}
	stopped := time.Now()
	if err := leaderH.Stop(); err != nil {
		t.Fatalf("leader's Run: %v", err)
	}
	managertest.Eventually(t, "a new leader", func() bool { l := act.leaders(); return len(l) == 1 && l[0] != first })
	t.Logf("graceful handoff: %v from Stop to the new leader's controller running", time.Since(stopped))
	for _, h := range hs {
		if h != leaderH {
			if err := h.Stop(); err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	act.assertNoOverlap(t)
}

// failLeaseUpdates makes lease updates fail while on is true.
func failLeaseUpdates(cs *fake.Clientset, on *atomic.Bool) {
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if on.Load() {
			return true, nil, errors.New("injected: API server unreachable")
		}
		return false, nil, nil
	})
}

func TestLostLeaseExit(t *testing.T) {
	act := &activity{active: map[string]int{}}
	h := managertest.New(t, "lost-manager", []descriptor.Descriptor{act.controller("elected-controller", "only")})
	var failing atomic.Bool
	failLeaseUpdates(h.Client, &failing)
	h.Options = fastElection("only")
	h.Start()
	h.WaitRunning("elected-controller")
	failing.Store(true)
	err := h.Err()
	if !errors.Is(err, leader.ErrLeaseLost) {
		t.Fatalf("Run = %v, want ErrLeaseLost", err)
	}
	if st, _ := h.Manager.Status("elected-controller"); st.Phase != manager.PhaseStopped {
		t.Errorf("controller after the lease was lost: %+v", st)
	}
	if got := act.leaders(); len(got) != 0 {
		t.Errorf("still running after Run returned: %v", got)
	}
}

func TestLostLeaseRecampaign(t *testing.T) {
	act := &activity{active: map[string]int{}}
	h := managertest.New(t, "lost-manager", []descriptor.Descriptor{act.controller("elected-controller", "only")})
	var failing atomic.Bool
	failLeaseUpdates(h.Client, &failing)
	h.Options = fastElection("only")
	h.Options.LostLeasePolicy = leader.Recampaign
	h.Start()
	h.WaitRunning("elected-controller")
	failing.Store(true)
	managertest.Eventually(t, "the term to stop", func() bool { st, _ := h.Manager.Status("elected-controller"); return st.Phase == manager.PhaseStopped })
	if h.Manager.IsLeader() {
		t.Error("still leader after the lease was lost")
	}
	failing.Store(false)
	managertest.Eventually(t, "leading again", func() bool {
		st, _ := h.Manager.Status("elected-controller")
		return st.Phase == manager.PhaseRunning && st.Starts == 2
	})
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	act.assertNoOverlap(t)
}

const migrationFile = `apiVersion: controllermanager.config.k8s.io/v1
kind: LeaderMigrationConfiguration
leaderName: test-migration
controllerLeaders:
- name: route          # an alias: KCM's filter ignores aliases, ctrlhost does not
  component: "*"
- name: cloud-node-controller
  component: other-manager
`

// migrationHarness is a replica "me" of "mig-manager" with leader migration
// per migrationFile: main-controller under the main lock,
// node-route-controller under the migration lock, cloud-node-controller run
// by another component. act records when each ran.
func migrationHarness(t *testing.T, act *activity) *managertest.Harness {
	t.Helper()
	return migrationHarnessOf(t, act.controller("main-controller", "main"),
		act.controller("node-route-controller", "migration").WithAliases("route"),
		act.controller("cloud-node-controller", "unowned"))
}

// migrationHarnessOf is migrationHarness over the given descriptors.
func migrationHarnessOf(t *testing.T, ds ...descriptor.Descriptor) *managertest.Harness {
	t.Helper()
	path := filepath.Join(t.TempDir(), "migration.yaml")
	if err := os.WriteFile(path, []byte(migrationFile), 0o600); err != nil {
		t.Fatal(err)
	}
	h := managertest.New(t, "mig-manager", ds)
	h.Options = fastElection("me")
	h.Options.EnableLeaderMigration = true
	h.Options.LeaderMigrationConfig = path
	return h
}

func TestLeaderMigrationSplitsControllers(t *testing.T) {
	act := &activity{active: map[string]int{}}
	h := migrationHarness(t, act)
	h.Start()
	h.WaitRunning("main-controller", "node-route-controller")
	if st, _ := h.Manager.Status("cloud-node-controller"); st.Phase != manager.PhaseSkipped || !strings.Contains(st.Reason, "test-migration") {
		t.Errorf("cloud-node-controller: %+v, want skipped as run by another component", st)
	}
	for _, name := range []string{"mig-manager", "test-migration"} {
		lease, err := h.Client.CoordinationV1().Leases("kube-system").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("lease %s: %v", name, err)
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "me" {
			t.Errorf("lease %s holder = %v", name, lease.Spec.HolderIdentity)
		}
	}
	h.WaitHealthy("/readyz")
	if _, body := h.Get("/readyz?verbose"); !strings.Contains(body, "[+]leader-migration ok: leading as me") || !strings.Contains(body, "[+]leader-election ok: leading as me") {
		t.Errorf("/readyz?verbose:\n%s", body)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestElectionBuildErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknownVersion := write("v9.yaml", strings.Replace(migrationFile, "/v1\n", "/v9\n", 1))
	malformed := write("bad.yaml", "apiVersion: [\n")
	upperUnfixable := write("upper.yaml", strings.Replace(migrationFile, "leaderName: test-migration", "leaderName: Test_Migration", 1))
	sameAsMain := write("same.yaml", strings.Replace(migrationFile, "leaderName: test-migration", "leaderName: m", 1))
	aSlotLease := write("slot.yaml", strings.Replace(migrationFile, "leaderName: test-migration", "leaderName: m-shard-slot-3", 1))
	tests := []struct {
		name   string
		modify func(*manager.Options)
		want   string
	}{
		{"renew deadline not below lease duration", func(o *manager.Options) { o.LeaderElection.RenewDeadline = 20 * time.Second },
			"must be greater than RenewDeadline"},
		{"negative retry period", func(o *manager.Options) { o.LeaderElection.RetryPeriod = -time.Second }, "RetryPeriod (--leader-elect-retry-period) must be greater than zero"},
		{"unknown lock type", func(o *manager.Options) { o.LeaderElection.ResourceLock = "endpoints" }, `--leader-elect-resource-lock`},
		{"bad policy", func(o *manager.Options) { o.LostLeasePolicy = "panic" }, `--leader-elect-lost-lease-policy: "panic" is not a policy`},
		{"unreadable migration file", func(o *manager.Options) {
			o.EnableLeaderMigration = true
			o.LeaderMigrationConfig = filepath.Join(dir, "missing.yaml")
		},
			"missing.yaml"},
		{"malformed migration file", func(o *manager.Options) { o.EnableLeaderMigration = true; o.LeaderMigrationConfig = malformed }, "bad.yaml"},
		{"unknown apiVersion", func(o *manager.Options) { o.EnableLeaderMigration = true; o.LeaderMigrationConfig = unknownVersion }, "v9"},
		{"leaderName no case change can fix", func(o *manager.Options) { o.EnableLeaderMigration = true; o.LeaderMigrationConfig = upperUnfixable }, `leaderName "Test_Migration" is not a valid Lease name`},
		// Defect: two replicas ran the main controller at once, one under
		// each of two locks that were one Lease.
		{"leaderName is the main lock's", func(o *manager.Options) { o.EnableLeaderMigration = true; o.LeaderMigrationConfig = sameAsMain },
			`leaderName "m" is also the main lock's name (--leader-elect-resource-name)`},
		{"leaderName is a slot Lease", func(o *manager.Options) {
			o.EnableLeaderMigration = true
			o.LeaderMigrationConfig = aSlotLease
			o.Sharding.Enabled = true
		}, `leaderName "m-shard-slot-3" is a Lease of shard group "m-shard"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := fastElection("x")
			tt.modify(&o)
			_, err := manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).WithOptions(o).
				Register(descriptor.New("node-route-controller", nop).WithAliases("route"), descriptor.New("cloud-node-controller", nop),
					descriptor.New("sharded-controller", nop).Sharded(shard.ByNamespace)).
				Build()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestLeaderMigrationParity: what kube-controller-manager accepts, ctrlhost
// accepts too, logging a warning for each thing that is likely a mistake,
// and applies as upstream does.
func TestLeaderMigrationParity(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const head = "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\n"
	// Upstream's default configuration, written out, and the files of
	// upstream's KCM → CCM walkthrough (names are the controllers' aliases).
	upstreamDefault := write("default.yaml", head+`leaderName: cloud-provider-extraction-migration
controllerLeaders:
- {name: route-controller, component: "*"}
- {name: service-controller, component: "*"}
- {name: cloud-node-lifecycle-controller, component: "*"}
`)
	toKCM := write("kcm.yaml", head+`leaderName: cloud-provider-extraction-migration
controllerLeaders:
- {name: route, component: kube-controller-manager}
- {name: service, component: kube-controller-manager}
- {name: cloud-node-lifecycle, component: kube-controller-manager}
`)
	duplicate := write("dup.yaml", head+`leaderName: m
controllerLeaders:
- {name: route, component: kube-controller-manager}
- {name: route, component: cloud-controller-manager}
`)
	upper := write("upper.yaml", head+`leaderName: 1-20-KCM-to-1-21-CCM
controllerLeaders:
- {name: cloud-node-lifecycle, component: kube-controller-manager}
`)
	cloud := func() []descriptor.Descriptor {
		return []descriptor.Descriptor{
			descriptor.New("node-route-controller", nop).WithAliases("route"),
			descriptor.New("service-lb-controller", nop).WithAliases("service"),
			descriptor.New("cloud-node-lifecycle-controller", nop).WithAliases("cloud-node-lifecycle"),
			descriptor.New("cloud-node-controller", nop).WithAliases("cloud-node"),
		}
	}
	kcmOnly := []descriptor.Descriptor{descriptor.New("replicaset-controller", nop).WithAliases("replicaset")}
	tests := []struct {
		name         string
		component    string
		descriptors  []descriptor.Descriptor
		modify       func(*manager.Options)
		wantWarnings []string
		wantSkipped  map[string]string // controller → part of its skip reason
		wantRunning  []string
	}{
		{name: "upstream's default file names controllers a KCM does not have",
			component: "kube-controller-manager", descriptors: kcmOnly,
			modify:       func(o *manager.Options) { o.EnableLeaderMigration = true; o.LeaderMigrationConfig = upstreamDefault },
			wantWarnings: []string{`no controller of this component is named "route-controller" (controllerLeaders[0]), "service-controller" (controllerLeaders[1]), "cloud-node-lifecycle-controller" (controllerLeaders[2])`, "not seeking the migration lock"},
			wantRunning:  []string{"replicaset-controller"}},
		{name: "the walkthrough's KCM file, read by the CCM",
			component: "cloud-controller-manager", descriptors: cloud(),
			modify: func(o *manager.Options) { o.EnableLeaderMigration = true; o.LeaderMigrationConfig = toKCM },
			wantSkipped: map[string]string{
				"node-route-controller":           "run by another component under lock cloud-provider-extraction-migration",
				"service-lb-controller":           "run by another component",
				"cloud-node-lifecycle-controller": "run by another component",
			},
			wantWarnings: []string{"not seeking the migration lock"},
			wantRunning:  []string{"cloud-node-controller"}},
		{name: "duplicate entries: the last wins",
			component: "kube-controller-manager", descriptors: cloud(),
			modify:       func(o *manager.Options) { o.EnableLeaderMigration = true; o.LeaderMigrationConfig = duplicate },
			wantWarnings: []string{`controllerLeaders[1] names "route" again (first at controllerLeaders[0]); the last entry wins`},
			wantSkipped:  map[string]string{"node-route-controller": "run by another component under lock m"}},
		{name: "upper-case leaderName: the Lease is its lower case",
			component: "cloud-controller-manager", descriptors: cloud(),
			modify:       func(o *manager.Options) { o.EnableLeaderMigration = true; o.LeaderMigrationConfig = upper },
			wantWarnings: []string{`leaderName "1-20-KCM-to-1-21-CCM" is not a valid Lease name`},
			wantSkipped:  map[string]string{"cloud-node-lifecycle-controller": "under lock 1-20-kcm-to-1-21-ccm"}},
		{name: "--leader-migration-config without --enable-leader-migration is not read",
			component: "kube-controller-manager", descriptors: cloud(),
			modify:       func(o *manager.Options) { o.LeaderMigrationConfig = filepath.Join(dir, "missing.yaml") },
			wantWarnings: []string{"--leader-migration-config", "is ignored (not read): --enable-leader-migration is not set"},
			wantRunning:  []string{"node-route-controller", "service-lb-controller"}},
		{name: "migration without leader election is ignored",
			component: "kube-controller-manager", descriptors: cloud(),
			modify: func(o *manager.Options) {
				o.LeaderElect = false
				o.EnableLeaderMigration = true
				o.LeaderMigrationConfig = toKCM
			},
			wantWarnings: []string{"--enable-leader-migration is ignored: leader migration only works with --leader-elect=true"},
			wantRunning:  []string{"node-route-controller", "cloud-node-controller"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var logged []string
			log := funcr.New(func(prefix, args string) {
				mu.Lock()
				defer mu.Unlock()
				logged = append(logged, args)
			}, funcr.Options{})
			o := fastElection("x")
			tt.modify(&o)
			m, err := manager.NewBuilder(tt.component).WithClient(fake.NewClientset(), nil).WithOptions(o).WithLogger(log).
				WithInProcessCloudProvider().Register(tt.descriptors...).Build()
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			mu.Lock()
			all := strings.ReplaceAll(strings.Join(logged, "\n"), `\"`, `"`)
			mu.Unlock()
			for _, w := range tt.wantWarnings {
				if !strings.Contains(all, w) {
					t.Errorf("log lacks %q; it is:\n%s", w, all)
				}
			}
			for name, reason := range tt.wantSkipped {
				if st, _ := m.Status(name); st.Phase != manager.PhaseSkipped || !strings.Contains(st.Reason, reason) {
					t.Errorf("%s: %+v, want skipped with %q", name, st, reason)
				}
			}
			for _, name := range tt.wantRunning {
				if st, _ := m.Status(name); st.Phase != manager.PhaseWaiting {
					t.Errorf("%s: %+v, want selected (waiting to run)", name, st)
				}
			}
		})
	}
}

func TestElectionFlags(t *testing.T) {
	o := manager.NewOptions()
	if !o.LeaderElect || o.LeaderElection.LeaseDuration != 15*time.Second || o.LeaderElection.RenewDeadline != 10*time.Second ||
		o.LeaderElection.RetryPeriod != 2*time.Second || o.LeaderElection.Namespace != "kube-system" || o.LeaderElection.ResourceLock != "leases" ||
		o.LostLeasePolicy != leader.Exit {
		t.Fatalf("defaults: %+v", o)
	}
	fs := newFlagSet(&o)
	if err := fs.Parse([]string{"--leader-elect=false", "--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s",
		"--leader-elect-retry-period=4s", "--leader-elect-resource-name=my-lock", "--leader-elect-resource-namespace=ops",
		"--leader-elect-resource-lock=leases", "--leader-elect-lost-lease-policy=recampaign",
		"--enable-leader-migration", "--leader-migration-config=/etc/mig.yaml"}); err != nil {
		t.Fatal(err)
	}
	le := o.LeaderElection
	if o.LeaderElect || le.LeaseDuration != 30*time.Second || le.RenewDeadline != 20*time.Second || le.RetryPeriod != 4*time.Second ||
		le.Name != "my-lock" || le.Namespace != "ops" || o.LostLeasePolicy != leader.Recampaign || !o.EnableLeaderMigration || o.LeaderMigrationConfig != "/etc/mig.yaml" {
		t.Fatalf("parsed: %+v", o)
	}
	if err := newFlagSet(&o).Parse([]string{"--leader-elect-lost-lease-policy=sometimes"}); err == nil {
		t.Fatal("bad policy accepted")
	}
}

// TestLostLeaseStuckControllerEndsRun: after the lease is lost, a controller
// that ignores cancellation gets the stop budget (LeaseDuration −
// RenewDeadline − RetryPeriod), not the longer shutdown timeout, and Run
// ends with ErrShutdownTimeout instead of campaigning again, even under the
// recampaign policy: standing again while it may still act would let two
// replicas act at once.
func TestLostLeaseStuckControllerEndsRun(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := managertest.New(t, "stuck-manager", []descriptor.Descriptor{
		descriptor.New("stubborn-controller", func(context.Context, descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(func(context.Context) error { <-release; return nil }), nil
		}),
	})
	var failing atomic.Bool
	failLeaseUpdates(h.Client, &failing)
	h.Options = fastElection("only")
	h.Options.LostLeasePolicy = leader.Recampaign
	h.Options.ControllerShutdownTimeout = time.Hour
	h.Start()
	h.WaitRunning("stubborn-controller")
	failing.Store(true)
	err := h.Err()
	if !errors.Is(err, manager.ErrShutdownTimeout) || !strings.Contains(err.Error(), "stubborn-controller") ||
		!strings.Contains(err.Error(), "could pass to another replica (the stop budget)") {
		t.Fatalf("Run = %v, want ErrShutdownTimeout within the stop budget naming stubborn-controller", err)
	}
}

// Defect: with leader migration, a follower of the main lock never
// observed the migration Lease (its elector only ran inside a main term),
// so its /readyz failed for good on leader-migration and on every migrated
// controller. A follower now follows both Leases and is ready, naming who
// holds each.
func TestMigrationFollowerIsReady(t *testing.T) {
	act := &activity{active: map[string]int{}}
	leaderH := migrationHarness(t, act)
	leadertest.EnforceResourceVersion(leaderH.Client)
	leaderH.Start()
	leaderH.WaitRunning("main-controller", "node-route-controller")

	follower := migrationHarness(t, &activity{active: map[string]int{}}).Share(leaderH)
	follower.Options.LeaderElection.Identity = "you"
	follower.Options.LeaderMigrationConfig = leaderH.Options.LeaderMigrationConfig
	follower.Start()
	follower.WaitHealthy("/readyz")
	_, body := follower.Get("/readyz?verbose")
	for _, want := range []string{
		"[+]leader-election ok: following me as you",
		"[+]leader-migration ok: following me as you",
		"[+]node-route-controller ok",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("follower's /readyz?verbose lacks %q:\n%s", want, body)
		}
	}
	for _, h := range []*managertest.Harness{follower, leaderH} {
		if err := h.Stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}
