//go:build integration

package bench

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/internal/shardgroup"
	"github.com/ctrlhost/ctrlhost/shard"
	"github.com/ctrlhost/ctrlhost/test/procs"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// shardSettings are the sharding bench's sizes.
type shardSettings struct {
	namespaces int // BENCH_SHARD_NS: namespaces, one ReplicaSet each
	pods       int // BENCH_SHARD_PODS: the ReplicaSet's replicas
	members    int // BENCH_SHARD_MEMBERS: replicas that share the slots
	slots      int // --shard-slots
	rounds     int // BENCH_ROUNDS: SIGTERM handoffs measured
}

// The sharded programs run the controllers that are sharded by namespace.
const shardedControllers = "replicaset,serviceaccount,root-ca-cert-publisher"

// BenchmarkSharding measures active-active sharding on testenv with
// ShardedListAndWatch on (the API server filters) and off (each replica's
// client does): cached pods and memory per replica, convergence with one
// replica unsharded, one sharded and several sharded, the time for one
// more replica to take its share, and SIGTERM handoffs of a member's
// slots. It runs once whatever b.N is (use -benchtime 1x).
func BenchmarkSharding(b *testing.B) {
	s := shardSettings{
		namespaces: envInt("BENCH_SHARD_NS", 100),
		pods:       envInt("BENCH_SHARD_PODS", 100),
		members:    envInt("BENCH_SHARD_MEMBERS", 3),
		slots:      shard.DefaultSlots,
		rounds:     envInt("BENCH_ROUNDS", 5),
	}
	for range b.N {
		sharding(b, s)
	}
}

// TestShardingBenchSmoke runs the sharding bench once at toy sizes, so
// that `make test` keeps it working (the numbers mean nothing here).
func TestShardingBenchSmoke(t *testing.T) {
	sharding(t, shardSettings{namespaces: 6, pods: 3, members: 2, slots: 4, rounds: 1})
}

func sharding(tb testing.TB, s shardSettings) {
	var tables strings.Builder
	for _, gate := range []bool{true, false} {
		env, err := testenv.Start(context.Background(), testenv.Options{FeatureGates: map[string]bool{"ShardedListAndWatch": gate}})
		if err != nil {
			tb.Fatal(err)
		}
		h := newHarness(tb, env)
		res := newShardSamples()
		h.shardingRun(s, res)
		if err := env.Stop(); err != nil {
			tb.Error(err)
		}
		fmt.Fprintf(&tables, "\nShardedListAndWatch=%v: %d namespaces × %d pods (one ReplicaSet each), %d slots, %d CPUs, %s\n\n%s",
			gate, s.namespaces, s.pods, s.slots, runtime.NumCPU(), runtime.Version(), res.table())
	}
	fmt.Print(tables.String())
	if out := os.Getenv("BENCH_SHARD_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(tables.String()), 0o644); err != nil {
			tb.Error(err)
		}
	}
}

// shardSamples is one value list per row and column ("value" unless a
// row compares configurations).
type shardSamples struct {
	*samples
}

func newShardSamples() shardSamples { return shardSamples{newSamples()} }

func (s shardSamples) table() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	b.WriteString("| measure | unit | median | worst | n |\n|---|---|---|---|---|\n")
	for _, row := range s.rows {
		v := s.vals[row]["value"]
		fmt.Fprintf(&b, "| %s | %s | %.3g | %.3g | %d |\n", row, s.unit[row], median(v), slices.Max(v), len(v))
	}
	return b.String()
}

func (s shardSamples) put(row, unit string, v float64) { s.add(row, unit, "value", v) }

var identityRE = regexp.MustCompile(`"identity":\s*"([^"]+)"`)

// member is one replica process of a shard group.
type member struct {
	p        *procs.Process
	identity string
}

// startMember starts examples/kcm with the sharded controllers, and
// returns it once it campaigns (its identity known).
func (h *harness) startMember(name, lease string, sharded bool) member {
	h.tb.Helper()
	p := ctrlhost
	p.controllers = shardedControllers
	if sharded {
		p.extra = []string{"--enable-sharding", fmt.Sprintf("--shard-slots=%d", h.shardSlots)}
	}
	proc := h.start(p, name, lease, 2000, 4000)
	l := proc.WaitLine("Campaigning for the lease", time.Time{}, 2*time.Minute)
	m := identityRE.FindStringSubmatch(l.Text)
	if m == nil {
		h.tb.Fatalf("%s: no identity in %q", name, l.Text)
	}
	return member{p: proc, identity: m[1]}
}

// slotHolders returns the holder of each of the group's held slot Leases.
func (h *harness) slotHolders(lease string, slots int) map[int]string {
	list, err := h.cs.CoordinationV1().Leases("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.tb.Fatal(err)
	}
	out := map[int]string{}
	for _, l := range list.Items {
		for i := range slots {
			if l.Name == fmt.Sprintf("%s-shard-slot-%d", lease, i) && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				out[i] = *l.Spec.HolderIdentity
			}
		}
	}
	return out
}

func (h *harness) waitBalanced(what, lease string, slots int, ids ...string) time.Time {
	h.tb.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if shardgroup.Balanced(h.slotHolders(lease, slots), slots, ids) {
			return time.Now()
		}
		if time.Now().After(deadline) {
			h.tb.Fatalf("%s: slots %v not balanced over %v within 2m", what, h.slotHolders(lease, slots), ids)
		}
		<-time.After(10 * time.Millisecond)
	}
}

// workload creates one ReplicaSet of s.pods replicas in each namespace
// and returns when every status counts them all.
func (h *harness) workload(s shardSettings, namespaces []string) time.Duration {
	h.tb.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	for _, ns := range namespaces {
		wg.Go(func() {
			if _, err := h.cs.AppsV1().ReplicaSets(ns).Create(context.Background(), replicaSet("web", int32(s.pods)), metav1.CreateOptions{}); err != nil {
				h.tb.Error(err)
			}
		})
	}
	wg.Wait()
	h.poll("sharded convergence", 30*time.Minute, func() bool {
		list, err := h.cs.AppsV1().ReplicaSets("").List(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=web"})
		if err != nil {
			return false
		}
		done := 0
		for _, rs := range list.Items {
			if rs.Status.Replicas == int32(s.pods) && rs.Status.ObservedGeneration == rs.Generation {
				done++
			}
		}
		return done == len(namespaces)
	})
	return time.Since(start)
}

// clearWorkload deletes the ReplicaSets and their pods (no garbage
// collector runs here) and waits until the pods are gone.
func (h *harness) clearWorkload(namespaces []string) {
	for _, ns := range namespaces {
		h.clean(ns)
	}
	h.poll("pods deleted", 5*time.Minute, func() bool {
		l, err := h.cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{Limit: 1, LabelSelector: "app=web"})
		return err == nil && len(l.Items) == 0
	})
}

func (h *harness) shardingRun(s shardSettings, res shardSamples) {
	tb := h.tb
	h.shardSlots = s.slots
	var namespaces []string
	for range s.namespaces {
		namespaces = append(namespaces, h.namespace("shard"))
	}
	space := shard.Space{Slots: s.slots}

	// Convergence and memory: one replica unsharded, one sharded, then
	// s.members sharded; each on a fresh workload.
	type config struct {
		label   string
		members int
		sharded bool
	}
	for _, c := range []config{{"1 replica, unsharded", 1, false}, {"1 replica, sharded", 1, true}, {fmt.Sprintf("%d replicas, sharded", s.members), s.members, true}} {
		lease := unique("bench-shard")
		var ms []member
		var ids []string
		for i := range c.members {
			m := h.startMember(fmt.Sprintf("%s #%d", c.label, i), lease, c.sharded)
			ms = append(ms, m)
			ids = append(ids, m.identity)
		}
		if c.sharded {
			h.waitBalanced(c.label, lease, s.slots, ids...)
		}
		took := h.workload(s, namespaces)
		res.put(fmt.Sprintf("convergence, %s", c.label), "s", took.Seconds())
		holders := h.slotHolders(lease, s.slots)
		for _, m := range ms {
			mem := measureMemory(tb, m.p)
			res.put(fmt.Sprintf("RSS per replica, %s", c.label), "MiB", mem.rssMiB)
			res.put(fmt.Sprintf("Go heap per replica, %s", c.label), "MiB", mem.heapMiB)
			cached := s.namespaces * s.pods
			if c.sharded {
				cached = 0
				for _, ns := range namespaces {
					if holders[space.SlotOfKey(ns)] == m.identity {
						cached += s.pods
					}
				}
			}
			res.put(fmt.Sprintf("pods in the slots a replica works, %s", c.label), "pods", float64(cached))
		}
		if c.members == s.members && c.sharded {
			h.shardingHandoffs(s, lease, ms, res)
		} else {
			for _, m := range ms {
				m.p.Signal(syscall.SIGTERM, time.Minute)
			}
		}
		h.clearWorkload(namespaces)
	}
}

// shardingHandoffs, with s.members replicas holding the slots: one more
// replica takes its share; then, s.rounds times, SIGTERM of a member hands
// its slots to the others (a new member replaces it between rounds).
func (h *harness) shardingHandoffs(s shardSettings, lease string, ms []member, res shardSamples) {
	ids := func() []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.identity)
		}
		return out
	}
	started := time.Now()
	joiner := h.startMember("joiner", lease, true)
	ms = append(ms, joiner)
	balanced := h.waitBalanced("a replica joined", lease, s.slots, ids()...)
	res.put(fmt.Sprintf("join: process start → %d slots balanced over %d replicas", s.slots, len(ms)), "s", balanced.Sub(started).Seconds())
	for round := range s.rounds {
		leaving := ms[0]
		ms = ms[1:]
		held := 0
		for _, id := range h.slotHolders(lease, s.slots) {
			if id == leaving.identity {
				held++
			}
		}
		sent := leaving.p.Send(syscall.SIGTERM)
		at := h.waitBalanced("after SIGTERM", lease, s.slots, ids()...)
		leaving.p.WaitExit(time.Minute)
		res.put(fmt.Sprintf("SIGTERM of a member → its slots held by the other %d", len(ms)), "s", at.Sub(sent).Seconds())
		if held == 0 {
			h.tb.Fatalf("round %d: the leaving member held no slot", round)
		}
		ms = append(ms, h.startMember(fmt.Sprintf("replacement %d", round), lease, true))
		h.waitBalanced("replacement joined", lease, s.slots, ids()...)
	}
	for _, m := range ms {
		m.p.Signal(syscall.SIGTERM, time.Minute)
	}
}
