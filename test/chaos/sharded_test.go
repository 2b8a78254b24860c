//go:build chaos || integration

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/internal/shardgroup"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// shardSlots is --shard-slots of the sharded chaos run.
const shardSlots = 8

// shardedScenarios are the faults the sharded run applies to one member.
var shardedScenarios = []string{partitionHang, partitionCut, sigterm, sigkill, apiRestart}

// slotInterval is one member's work on one slot.
type slotInterval struct {
	id         string
	slot       int
	start, end int64 // end 0: still open
}

// slotIntervals reads the slot terms from the activity file; a process
// exit ends every slot its replica had open.
func (c *cluster) slotIntervals() []slotInterval {
	var out []slotInterval
	open := map[string]map[int]int{} // id → slot → index in out
	closeAt := func(id string, slot int, at int64) {
		if i, ok := open[id][slot]; ok {
			out[i].end = at
			delete(open[id], slot)
		}
	}
	for _, e := range c.events() {
		switch e.what {
		case "slot-start":
			if open[e.id] == nil {
				open[e.id] = map[int]int{}
			}
			slot := int(e.term)
			closeAt(e.id, slot, e.at)
			open[e.id][slot] = len(out)
			out = append(out, slotInterval{id: e.id, slot: slot, start: e.at})
		case "slot-stop":
			closeAt(e.id, int(e.term), e.at)
		case "exit":
			for slot := range open[e.id] {
				closeAt(e.id, slot, e.at)
			}
		}
	}
	return out
}

// slotHolders returns who works each slot now.
func (c *cluster) slotHolders() map[int]string {
	h := map[int]string{}
	for _, iv := range c.slotIntervals() {
		if iv.end == 0 {
			h[iv.slot] = iv.id
		}
	}
	return h
}

// waitSlots polls until cond holds for the slot holders or d passes.
func (c *cluster) waitSlots(d time.Duration, cond func(map[int]string) bool) (time.Time, bool) {
	var at time.Time
	if !poll.For(d, func() bool {
		if !cond(c.slotHolders()) {
			return false
		}
		at = time.Now()
		return true
	}) {
		return time.Time{}, false
	}
	return at, true
}

// allWorked: every slot is worked, by anyone but not.
func allWorked(not string) func(map[int]string) bool {
	return func(h map[int]string) bool {
		if len(h) != shardSlots {
			return false
		}
		for _, id := range h {
			if id == not {
				return false
			}
		}
		return true
	}
}

// slotOverlaps returns every pair of intervals in which two members worked
// one slot at once (open intervals last until now).
func slotOverlaps(ivs []slotInterval, now int64) [][2]slotInterval {
	bySlot := map[int][]slotInterval{}
	for _, iv := range ivs {
		if iv.end == 0 {
			iv.end = now
		}
		bySlot[iv.slot] = append(bySlot[iv.slot], iv)
	}
	var out [][2]slotInterval
	for _, list := range bySlot {
		sort.Slice(list, func(i, j int) bool { return list[i].start < list[j].start })
		for i := 1; i < len(list); i++ {
			for j := 0; j < i; j++ {
				if list[j].id != list[i].id && list[i].start < list[j].end {
					out = append(out, [2]slotInterval{list[j], list[i]})
				}
			}
		}
	}
	return out
}

// runShardedChaos runs three members of a shard group (--enable-sharding,
// shardSlots slots) through p's faults in random order, each applied to a
// member that works slots: after each, it measures how long until the
// victim worked none of its slots (victim-stop) and until every slot was
// worked by the others (reowned), then heals and waits until the slots are
// balanced over the three again. No slot may be worked by two members at once.
func runShardedChaos(t *testing.T, env *testenv.Env, p plan, budget time.Duration, seed uint64) {
	c := newClusterWith(t, env, "exit", "chaos-sharded", []string{"--sharded", "--enable-sharding", fmt.Sprintf("--shard-slots=%d", shardSlots)})
	rng := rand.New(rand.NewPCG(seed, 1))
	var order []string
	for _, s := range shardedScenarios {
		for range p[s] {
			order = append(order, s)
		}
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	t.Logf("sharded: %d rounds, seed %d", len(order), seed)
	results := map[string]*result{}
	for _, s := range shardedScenarios {
		results[s] = &result{}
	}
	deadline := time.Now().Add(budget)
	if _, ok := c.waitSlots(handoffDeadline, func(h map[int]string) bool { return shardgroup.Balanced(h, shardSlots, c.ids) }); !ok {
		t.Fatalf("sharded: the slots were not balanced within %v of the start: %v", handoffDeadline, c.slotHolders())
	}
	for i, s := range order {
		if time.Now().After(deadline) {
			t.Logf("sharded: deadline reached after %d of %d rounds", i, len(order))
			break
		}
		res := results[s]
		res.count++
		holders := c.slotHolders()
		var members []string
		for _, id := range holders {
			members = append(members, id)
		}
		slices.Sort(members)
		members = slices.Compact(members)
		victim := members[rng.IntN(len(members))]
		t0 := time.Now()
		switch s {
		case partitionHang:
			c.replicas[victim].proxy.set(hang)
		case partitionCut:
			c.replicas[victim].proxy.set(cut)
		case sigterm:
			c.signal(victim, syscall.SIGTERM)
		case sigkill:
			c.signal(victim, syscall.SIGKILL)
		case apiRestart:
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := env.RestartAPIServer(ctx)
			cancel()
			if err != nil {
				t.Fatalf("restarting the API server: %v", err)
			}
			victim = "" // everyone is cut off for a moment
		}
		if victim != "" {
			// The victim stops working its slots (a SIGKILL's exit line
			// closes them), and the others take every slot.
			if at, ok := c.waitSlots(handoffDeadline, func(h map[int]string) bool {
				for _, id := range h {
					if id == victim {
						return false
					}
				}
				return true
			}); ok {
				res.add("victim-stop", at.Sub(t0))
			} else {
				res.stuck++
			}
		}
		if at, ok := c.waitSlots(handoffDeadline, allWorked(victim)); ok {
			res.add("reowned", at.Sub(t0))
		} else {
			res.noLeader++
			t.Logf("sharded round %d (%s on %s): slots worked after %v: %v", i, s, victim, handoffDeadline, c.slotHolders())
		}
		for _, id := range c.ids {
			c.replicas[id].proxy.set(forward)
		}
		// A partitioned main leader exits (exit policy) a moment after its
		// slots were taken: restart replicas while waiting for balance.
		if _, ok := c.waitSlots(handoffDeadline, func(h map[int]string) bool {
			c.restartExited()
			return shardgroup.Balanced(h, shardSlots, c.ids)
		}); !ok {
			t.Errorf("sharded round %d (%s on %s): the slots were not balanced again within %v of healing: %v", i, s, victim, handoffDeadline, c.slotHolders())
			for _, id := range c.ids {
				t.Logf("%s running=%v, its log's end:\n%s", id, c.running(id), c.logTail(id, 40))
			}
		}
	}
	c.stopAll()
	over := slotOverlaps(c.slotIntervals(), time.Now().UnixNano())
	var b strings.Builder
	fmt.Fprintf(&b, "sharded: %d members, %d slots, lease=%v renew=%v retry=%v\n", len(c.ids), shardSlots, leaseDuration, renewDeadline, retryPeriod)
	fmt.Fprintf(&b, "%-18s %5s %7s %7s  %s\n", "scenario", "count", "stuck", "unowned", "timings min/median/max")
	for _, s := range shardedScenarios {
		res := results[s]
		var parts []string
		for _, n := range []string{"victim-stop", "reowned"} {
			if len(res.timings[n]) > 0 {
				parts = append(parts, n+"="+durStats(res.timings[n]))
			}
		}
		fmt.Fprintf(&b, "%-18s %5d %7d %7d  %s\n", s, res.count, res.stuck, res.noLeader, strings.Join(parts, " "))
		if res.stuck > 0 {
			t.Errorf("sharded %s: %d rounds in which the victim still worked a slot after %v", s, res.stuck, handoffDeadline)
		}
		if res.noLeader > 0 {
			t.Errorf("sharded %s: %d rounds in which a slot was not worked by another member within %v", s, res.noLeader, handoffDeadline)
		}
	}
	fmt.Fprintf(&b, "slot overlaps=%d\n", len(over))
	t.Log("\n" + b.String())
	for _, o := range over {
		t.Errorf("slot %d worked by %s [%d,%d] and %s [%d,%d] at once", o[0].slot, o[0].id, o[0].start, o[0].end, o[1].id, o[1].start, o[1].end)
	}
}

// logTail returns the last n lines of replica id's log.
func (c *cluster) logTail(id string, n int) string {
	data, err := os.ReadFile(filepath.Join(c.dir, id+".log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
