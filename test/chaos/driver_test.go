//go:build chaos || integration

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/testenv"
)

// Scenario names, as the table prints them.
const (
	partitionHang = "partition-hang"
	partitionCut  = "partition-cut"
	partitionLate = "partition-delay"
	sigterm       = "sigterm"
	sigkill       = "sigkill"
	apiRestart    = "apiserver-restart"
	ctrlPanic     = "controller-panic"
	ignoreContext = "ignore-context"
)

var scenarios = []string{partitionHang, partitionCut, partitionLate, sigterm, sigkill, apiRestart, ctrlPanic, ignoreContext}

// plan is how many rounds of each scenario to run, per lost-lease policy.
type plan map[string]int

// result gathers one scenario's measurements.
type result struct {
	count    int
	overlaps int // attributed by the later interval's start
	late     int // accepted-after-takeover, attributed by attempt time
	stuck    int
	noLeader int // rounds after which no replica took over in time
	timings  map[string][]time.Duration
}

func (r *result) add(name string, d time.Duration) {
	if r.timings == nil {
		r.timings = map[string][]time.Duration{}
	}
	r.timings[name] = append(r.timings[name], d)
}

// run is one policy's chaos run.
type run struct {
	marks   []mark // each round's scenario and start, in order
	c       *cluster
	env     *testenv.Env
	results map[string]*result
	rng     *rand.Rand
}

// runChaos drives a cluster through the plan in random order until it is
// done or deadline passes, then returns the results.
func runChaos(t *testing.T, env *testenv.Env, policy string, p plan, deadline time.Time, seed uint64) *run {
	return runChaosWith(t, env, policy, "chaos-"+policy, nil, p, deadline, seed)
}

// runChaosWith is runChaos with more flags for every replica, on lease.
func runChaosWith(t *testing.T, env *testenv.Env, policy, lease string, args []string, p plan, deadline time.Time,
	seed uint64) *run {
	c := newClusterWith(t, env, policy, lease, args)
	r := &run{c: c, env: env, results: map[string]*result{}, rng: rand.New(rand.NewPCG(seed, 0))}
	var order []string
	for _, s := range scenarios {
		for range p[s] {
			order = append(order, s)
		}
		r.results[s] = &result{}
	}
	r.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	t.Logf("policy %s: %d rounds, seed %d", policy, len(order), seed)
	for i, s := range order {
		if time.Now().After(deadline) {
			t.Logf("policy %s: global deadline reached after %d of %d rounds", policy, i, len(order))
			break
		}
		leader, ok := c.waitLeader(handoffDeadline)
		if !ok {
			t.Errorf("policy %s round %d (%s): no replica became active within %v", policy, i, s, handoffDeadline)
			r.recover()
			continue
		}
		r.round(t, s, leader)
		r.recover()
	}
	return r
}

// recover heals every proxy, clears every control file and restarts
// replicas that exited (the driver's job under the exit policy).
func (r *run) recover() {
	for _, id := range r.c.ids {
		r.c.replicas[id].proxy.set(forward)
		r.c.control(id, "panic", false)
		r.c.control(id, "ignore-context", false)
	}
	r.c.restartExited()
}

func (r *run) round(t *testing.T, s, leader string) {
	c, res := r.c, r.results[s]
	res.count++
	t0 := time.Now()
	t0n := t0.UnixNano()
	r.marks = append(r.marks, mark{s, t0n})
	wantExit := false
	switch s {
	case partitionHang, partitionCut, partitionLate:
		mode := map[string]proxyMode{partitionHang: hang, partitionCut: cut, partitionLate: delay}[s]
		c.replicas[leader].proxy.set(mode)
		wantExit = c.policy == "exit"
	case sigterm:
		c.signal(leader, syscall.SIGTERM)
		wantExit = true
	case sigkill:
		c.signal(leader, syscall.SIGKILL)
	case apiRestart:
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := r.env.RestartAPIServer(ctx)
		cancel()
		if err != nil {
			t.Fatalf("restarting kube-apiserver: %v", err)
		}
		res.add("restart", time.Since(t0))
		// The leader may keep its lease through a short outage; either way
		// some replica must be active again.
		if _, ok := c.waitLeader(handoffDeadline); !ok {
			res.noLeader++
		} else {
			res.add("active-again", time.Since(t0))
		}
		return
	case ctrlPanic:
		c.control(leader, "panic", true)
	case ignoreContext:
		c.control(leader, "ignore-context", true)
		c.signal(leader, syscall.SIGTERM)
		wantExit = true
	}
	stop, start, stopped, started := c.handoff(t0n, leader, handoffDeadline)
	if s == ctrlPanic {
		// A panicking controller ends its interval; it is a failed
		// controller, not a lost lease, so no takeover is required.
		if stopped {
			res.add("panic→stop", time.Duration(stop.at-t0n))
		} else {
			res.noLeader++
		}
		c.control(leader, "panic", false)
		// Hand over, so the next round starts from a working leader.
		c.signal(leader, syscall.SIGTERM)
		if !c.waitExit(leader, exitDeadline) {
			res.stuck++
			c.signal(leader, syscall.SIGKILL)
			c.waitExit(leader, exitDeadline)
		}
		return
	}
	if stopped {
		res.add("old-stop", time.Duration(stop.at-t0n))
	}
	if started {
		res.add("new-start", time.Duration(start.at-t0n))
	} else {
		res.noLeader++
	}
	if stopped && started {
		res.add("margin", time.Duration(start.at-stop.at))
	}
	if wantExit {
		if !c.waitExit(leader, exitDeadline) {
			res.stuck++
			t.Logf("%s: %s still running %v after %s", c.policy, leader, exitDeadline, s)
			c.signal(leader, syscall.SIGKILL)
			c.waitExit(leader, exitDeadline)
		} else {
			res.add("exit", time.Since(t0))
		}
	}
}

// mark is when a round began.
type mark struct {
	scenario string
	at       int64
}

// scenarioAt names the round running at unix-nanos at.
func (r *run) scenarioAt(at int64) string {
	name := "setup"
	for _, m := range r.marks {
		if m.at <= at {
			name = m.scenario
		}
	}
	return name
}

// interval is one active interval of one replica.
type interval struct {
	id         string
	start, end int64
}

// overlaps counts pairs of intervals of different replicas that intersect;
// an interval not closed by stop or exit ends at now.
func overlaps(events []event, now int64) [][2]interval {
	var ivs []interval
	open := map[string]int{}
	for _, e := range events {
		switch e.what {
		case "start":
			open[e.id] = len(ivs)
			ivs = append(ivs, interval{id: e.id, start: e.at, end: -1})
		case "stop", "exit":
			if i, ok := open[e.id]; ok {
				ivs[i].end = e.at
				delete(open, e.id)
			}
		}
	}
	for i := range ivs {
		if ivs[i].end < 0 {
			ivs[i].end = now
		}
	}
	var out [][2]interval
	for i := range ivs {
		for j := i + 1; j < len(ivs); j++ {
			a, b := ivs[i], ivs[j]
			if a.id != b.id && a.start < b.end && b.start < a.end {
				out = append(out, [2]interval{a, b})
			}
		}
	}
	return out
}

// write is one accepted write as the API server ordered it.
type write struct {
	id      string
	term    string
	seq     string
	attempt int64 // unix-nanos, the writer's clock
	rv      uint64
}

// violation is a write accepted after newer, another replica's term's first
// write.
type violation struct{ late, newer write }

func (v violation) String() string {
	return fmt.Sprintf("%s term %s seq %s at rv %d, after %s term %s first wrote at rv %d",
		v.late.id, v.late.term, v.late.seq, v.late.rv, v.newer.id, v.newer.term, v.newer.rv)
}

// acceptedAfterTakeover lists every write in the namespace and counts
// writes of a term accepted after a newer term of another replica had
// written: a write w of replica A is a violation when some term of another
// replica B made its first write after A's term's first write and before w.
func acceptedAfterTakeover(ctx context.Context, client kubernetes.Interface, prefix string) (violations []violation, total int, err error) {
	var ws []write
	opts := metav1.ListOptions{LabelSelector: "chaos.ctrlhost.io/write=true", Limit: 500}
	for {
		list, err := client.CoreV1().ConfigMaps(namespace).List(ctx, opts)
		if err != nil {
			return nil, 0, err
		}
		for _, cm := range list.Items {
			id := cm.Annotations["chaos.ctrlhost.io/identity"]
			if !strings.HasPrefix(id, prefix) {
				continue
			}
			rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
			if err != nil {
				return nil, 0, fmt.Errorf("configmap %s: resourceVersion %q: %w", cm.Name, cm.ResourceVersion, err)
			}
			attempt, _ := strconv.ParseInt(cm.Annotations["chaos.ctrlhost.io/attempt"], 10, 64)
			ws = append(ws, write{id: id, term: cm.Annotations["chaos.ctrlhost.io/term"],
				seq: cm.Annotations["chaos.ctrlhost.io/seq"], attempt: attempt, rv: rv})
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].rv < ws[j].rv })
	type termKey struct{ id, term string }
	first := map[termKey]uint64{}
	var firsts []write // first write of each term, in RV order
	for _, w := range ws {
		k := termKey{w.id, w.term}
		if _, ok := first[k]; !ok {
			first[k] = w.rv
			firsts = append(firsts, w)
		}
	}
	for _, w := range ws {
		f := first[termKey{w.id, w.term}]
		// firsts is sorted by RV: look for another replica's term that began
		// strictly between this term's first write and w.
		i := sort.Search(len(firsts), func(i int) bool { return firsts[i].rv > f })
		for ; i < len(firsts) && firsts[i].rv < w.rv; i++ {
			if b := firsts[i]; b.id != w.id {
				violations = append(violations, violation{late: w, newer: b})
				break
			}
		}
	}
	return violations, len(ws), nil
}

func durStats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
	return fmt.Sprintf("%s/%s/%s", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]))
}

// report prints the table and checks the invariants.
func (r *run) report(t *testing.T, fencingExpected bool) {
	c := r.c
	c.stopAll()
	events := c.events()
	over := overlaps(events, time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := kubernetes.NewForConfig(r.env.Config())
	if err != nil {
		t.Fatal(err)
	}
	viols, total, err := acceptedAfterTakeover(ctx, client, c.policy+"-")
	if err != nil {
		t.Fatalf("listing writes: %v", err)
	}
	attribute := func(at int64) *result {
		if res, ok := r.results[r.scenarioAt(at)]; ok {
			return res
		}
		return &result{} // before the first round
	}
	for _, o := range over {
		attribute(max(o[0].start, o[1].start)).overlaps++
		t.Logf("overlap (%s): %s [%d,%d] and %s [%d,%d], %v", r.scenarioAt(max(o[0].start, o[1].start)),
			o[0].id, o[0].start, o[0].end, o[1].id, o[1].start, o[1].end,
			time.Duration(min(o[0].end, o[1].end)-max(o[0].start, o[1].start)))
	}
	lateCounted := 0 // violations the assertion covers
	for _, v := range viols {
		s := r.scenarioAt(v.late.attempt)
		attribute(v.late.attempt).late++
		if s != partitionLate {
			lateCounted++
		}
	}
	outcomes := map[string]int{}
	errorKinds := map[string]int{}
	for _, e := range events {
		if e.what == "write" {
			outcomes[e.res]++
			if e.msg != "" {
				errorKinds[addrs.ReplaceAllString(e.msg, "127.0.0.1:*")]++
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "policy=%s lease=%v renew=%v retry=%v; writes attempted: ok=%d fenced=%d error=%d; accepted writes listed: %d\n",
		c.policy, leaseDuration, renewDeadline, retryPeriod, outcomes["ok"], outcomes["fenced"], outcomes["error"], total)
	fmt.Fprintf(&b, "%-18s %5s %8s %5s %5s %7s  %s\n", "scenario", "count", "overlaps", "late", "stuck", "no-lead", "timings min/median/max")
	stuck, noLeader := 0, 0
	for _, s := range scenarios {
		res := r.results[s]
		stuck += res.stuck
		noLeader += res.noLeader
		var names []string
		for n := range res.timings {
			names = append(names, n)
		}
		sort.Strings(names)
		var parts []string
		for _, n := range names {
			parts = append(parts, n+"="+durStats(res.timings[n]))
		}
		fmt.Fprintf(&b, "%-18s %5d %8d %5d %5d %7d  %s\n", s, res.count, res.overlaps, res.late, res.stuck, res.noLeader, strings.Join(parts, " "))
	}
	fmt.Fprintf(&b, "overlaps=%d accepted-after-takeover=%d, of which outside %s: %d (fencing expected: %v)\n",
		len(over), len(viols), partitionLate, lateCounted, fencingExpected)
	t.Log("\n" + b.String())
	for msg, n := range errorKinds {
		t.Logf("%d failed writes: %s", n, msg)
	}
	for _, v := range viols {
		t.Logf("accepted after takeover (%s): %s", r.scenarioAt(v.late.attempt), v)
	}
	if len(over) != 0 {
		t.Errorf("policy %s: %d overlapping active intervals", c.policy, len(over))
	}
	if stuck != 0 {
		t.Errorf("policy %s: %d replicas did not exit within %v", c.policy, stuck, exitDeadline)
	}
	if noLeader != 0 {
		t.Errorf("policy %s: %d rounds in which no replica took over (or a panic did not end the controller) within %v", c.policy, noLeader, handoffDeadline)
	}
	// A write held in the network across a partition and delivered after
	// takeover (partition-delay) left the client while its lease was valid:
	// no client-side fence can stop it, so it is reported, not asserted.
	if fencingExpected && lateCounted != 0 {
		t.Errorf("policy %s: %d writes accepted from a replica after another had started a newer term", c.policy, lateCounted)
	}
}

// addrs matches loopback addresses, so error messages group by kind.
var addrs = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)

// fencingExpected reads CHAOS_EXPECT_FENCING (default true).
func fencingExpected(t *testing.T) bool {
	v := os.Getenv("CHAOS_EXPECT_FENCING")
	if v == "" {
		return true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		t.Fatalf("CHAOS_EXPECT_FENCING=%q: want true or false", v)
	}
	return b
}

// startEnv starts a control plane with the chaos namespace.
func startEnv(t *testing.T) *testenv.Env {
	t.Helper()
	ctx := context.Background()
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	client, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return env
}

// chaosSeed reads CHAOS_SEED, or picks a seed.
func chaosSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: want an unsigned integer", s)
		}
		seed = v
	}
	return seed
}

// runSharded runs the sharded plan (runShardedChaos) on a control plane
// of its own, within budget.
func runSharded(t *testing.T, p plan, budget time.Duration) {
	t.Run("sharded", func(t *testing.T) {
		runShardedChaos(t, startEnv(t), p, budget, chaosSeed(t))
	})
}

// runMigration runs the plan with leader migration on: the chaos
// controller is migrated (component "*"), so it runs under the migration
// lock inside each main term, and every partition, signal and restart
// meets both locks. The checks are the same: the controller never runs on
// two replicas at once, and no write lands after a takeover.
func runMigration(t *testing.T, p plan, budget time.Duration) {
	t.Run("migration", func(t *testing.T) {
		env := startEnv(t)
		file := filepath.Join(t.TempDir(), "migration.yaml")
		cfg := "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\n" +
			"leaderName: chaos-migration\ncontrollerLeaders:\n- name: chaos-controller\n  component: \"*\"\n"
		if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"--enable-leader-migration", "--leader-migration-config=" + file}
		r := runChaosWith(t, env, "exit", "chaos-migrating", args, p, time.Now().Add(budget), chaosSeed(t))
		r.report(t, fencingExpected(t))
	})
}

// runCredentials runs the plan with --use-service-account-credentials: the
// chaos controller writes as its own ServiceAccount (granted what it
// writes), so its token minting meets the fence and the stop too.
func runCredentials(t *testing.T, p plan, budget time.Duration) {
	t.Run("credentials", func(t *testing.T) {
		env := startEnv(t)
		grantWriter(t, env, "chaos-controller")
		r := runChaosWith(t, env, "recampaign", "chaos-credentials", []string{"--use-service-account-credentials"},
			p, time.Now().Add(budget), chaosSeed(t))
		r.report(t, fencingExpected(t))
	})
}

// grantWriter lets kube-system/<sa> create ConfigMaps and events in the
// chaos namespace.
func grantWriter(t *testing.T, env *testenv.Env, sa string) {
	t.Helper()
	ctx := context.Background()
	client, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "chaos-writer", Namespace: namespace},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get", "list"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		}}
	if _, err := client.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "chaos-writer", Namespace: namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "chaos-writer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: "kube-system"}}}
	if _, err := client.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runPolicies runs the plan under both lost-lease policies, one after the
// other on one control plane, within budget.
func runPolicies(t *testing.T, p plan, budget time.Duration) {
	env := startEnv(t)
	deadline := time.Now().Add(budget)
	seed := chaosSeed(t)
	expect := fencingExpected(t)
	for i, policy := range []string{"exit", "recampaign"} {
		t.Run(policy, func(t *testing.T) {
			// Each policy gets half of what is left.
			left := time.Until(deadline)
			if i == 0 {
				left /= 2
			}
			r := runChaos(t, env, policy, p, time.Now().Add(left), seed+uint64(i))
			r.report(t, expect)
		})
	}
}
