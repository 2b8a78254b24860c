//go:build integration

package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/internal/shardgroup"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// Sharded replicas' Lease durations: short, for a test that waits out a
// crashed member's Leases, yet with room for a loaded 2-core machine.
const (
	shardLease = 4 * time.Second
	shardRenew = 2 * time.Second
	shardRetry = 500 * time.Millisecond
	shardSlots = 8
)

// slotHolders returns, from the activity file, who works each slot now
// ("start:<slot>" without its "stop:<slot>"; a SIGKILLed replica stopped
// when it was killed).
func (r *replicas) slotHolders() map[int]string {
	holders := map[int]string{}
	for _, e := range r.events() {
		what, slotStr, ok := strings.Cut(e.what, ":")
		if !ok {
			continue
		}
		slot, _ := strconv.Atoi(slotStr)
		switch what {
		case "start":
			holders[slot] = e.identity
		case "stop":
			if holders[slot] == e.identity {
				delete(holders, slot)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for slot, id := range holders {
		if _, killed := r.killedAt[id]; killed {
			delete(holders, slot)
		}
	}
	return holders
}

// waitSlots polls until cond holds for the slot holders, failing after
// timeout, and returns when it first held.
func (r *replicas) waitSlots(what string, timeout time.Duration, cond func(map[int]string) bool) time.Time {
	r.tb.Helper()
	var h map[int]string
	var at time.Time
	if !poll.For(timeout, func() bool {
		if h = r.slotHolders(); !cond(h) {
			return false
		}
		at = time.Now()
		return true
	}) {
		r.tb.Fatalf("%s: not within %v; slots worked: %v", what, timeout, h)
	}
	return at
}

// assertNoSlotOverlap checks from the activity file that no slot was ever
// worked by two replicas at once (a SIGKILLed replica's intervals end when
// it was killed).
func (r *replicas) assertNoSlotOverlap() {
	r.tb.Helper()
	type iv struct {
		id         string
		start, end time.Time
	}
	open := map[string]map[int]time.Time{} // identity → slot → start
	bySlot := map[int][]iv{}
	for _, e := range r.events() {
		what, slotStr, ok := strings.Cut(e.what, ":")
		if !ok {
			continue
		}
		slot, _ := strconv.Atoi(slotStr)
		if open[e.identity] == nil {
			open[e.identity] = map[int]time.Time{}
		}
		switch what {
		case "start":
			open[e.identity][slot] = e.at
		case "stop":
			bySlot[slot] = append(bySlot[slot], iv{e.identity, open[e.identity][slot], e.at})
			delete(open[e.identity], slot)
		}
	}
	r.mu.Lock()
	for id, slots := range open {
		end, killed := r.killedAt[id]
		if !killed {
			end = time.Now()
		}
		for slot, start := range slots {
			bySlot[slot] = append(bySlot[slot], iv{id, start, end})
		}
	}
	r.mu.Unlock()
	for slot, ivs := range bySlot {
		slices.SortFunc(ivs, func(a, b iv) int { return a.start.Compare(b.start) })
		for i := 1; i < len(ivs); i++ {
			if ivs[i].start.Before(ivs[i-1].end) {
				r.tb.Errorf("slot %d: %s worked it %v–%v while %s worked it %v–%v", slot,
					ivs[i-1].id, ivs[i-1].start, ivs[i-1].end, ivs[i].id, ivs[i].start, ivs[i].end)
			}
		}
	}
}

// TestShardedReplicasAcrossProcesses: replica processes with
// --enable-sharding share replicaset-controller's namespaces and a
// recording sharded controller's slots, on kube-apiserver with
// ShardedListAndWatch on (the server filters) and off (each replica's
// client does), or on a server older than the gate (as off). Three
// replicas balance the slots; SIGTERM of one hands its slots over at once;
// a fourth joining takes its share; SIGKILL of one hands its slots over
// once their Leases expire, not before; the ReplicaSets converge all
// along; no slot is ever worked by two replicas.
func TestShardedReplicasAcrossProcesses(t *testing.T) {
	for _, setting := range shardedListSettings(t) {
		t.Run(setting.Name, func(t *testing.T) {
			env := startEnv(t, testenv.Options{FeatureGates: setting.Gates})
			kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
			if err := env.WriteKubeconfig(kubeconfig); err != nil {
				t.Fatal(err)
			}
			cs := clientset(t, env.Config())
			const sets = 12
			var namespaces []string
			for range sets {
				ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sharded-"}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := replicatedKinds[0].create(t.Context(), cs, ns.Name, "web", 2); err != nil {
					t.Fatal(err)
				}
				namespaces = append(namespaces, ns.Name)
			}

			r := newReplicas(t, kubeconfig, "it-shard-"+strconv.FormatInt(time.Now().UnixNano(), 36))
			r.args = []string{"--enable-sharding", fmt.Sprintf("--shard-slots=%d", shardSlots),
				"--leader-elect-lease-duration=" + shardLease.String(), "--leader-elect-renew-deadline=" + shardRenew.String(),
				"--leader-elect-retry-period=" + shardRetry.String()}
			for _, id := range []string{"a", "b", "c"} {
				r.start(id)
			}
			r.waitSlots("three replicas balanced", time.Minute, func(h map[int]string) bool { return shardgroup.Balanced(h, shardSlots, []string{"a", "b", "c"}) })
			allConverge(t, cs, namespaces, 2)

			// SIGTERM: b's slots are worked elsewhere at once.
			mine := func(id string) []int {
				var out []int
				for slot, h := range r.slotHolders() {
					if h == id {
						out = append(out, slot)
					}
				}
				return out
			}
			bSlots := mine("b")
			sent, err := r.signal("b", syscall.SIGTERM)
			if err != nil {
				t.Fatalf("SIGTERM b: %v", err)
			}
			took := r.waitSlots("b's slots worked elsewhere", shardLease, func(h map[int]string) bool { return shardgroup.Balanced(h, shardSlots, []string{"a", "c"}) }).Sub(sent)
			t.Logf("SIGTERM: b's slots %v worked elsewhere %v after the signal", bSlots, took.Round(time.Millisecond))

			// A fourth replica takes its share.
			joined := time.Now()
			r.start("d")
			took = r.waitSlots("d's share", time.Minute, func(h map[int]string) bool { return shardgroup.Balanced(h, shardSlots, []string{"a", "c", "d"}) }).Sub(joined)
			t.Logf("join: balanced again %v after d started", took.Round(time.Millisecond))

			// SIGKILL: c's slots wait for their Leases to expire.
			cSlots := mine("c")
			killed, _ := r.signal("c", syscall.SIGKILL)
			bound := shardLease + shardRenew + shardRetry + 5*time.Second
			took = r.waitSlots("c's slots worked elsewhere", bound, func(h map[int]string) bool { return shardgroup.Balanced(h, shardSlots, []string{"a", "d"}) }).Sub(killed)
			t.Logf("SIGKILL: c's slots %v worked elsewhere %v after the kill (lease %v)", cSlots, took.Round(time.Millisecond), shardLease)
			if took < shardLease/2 {
				t.Errorf("c's slots were worked elsewhere %v after the kill, before their Leases could expire (%v)", took, shardLease)
			}

			for _, ns := range namespaces {
				if err := replicatedKinds[0].scale(t.Context(), cs, ns, "web", 3); err != nil {
					t.Fatal(err)
				}
			}
			allConverge(t, cs, namespaces, 3)
			r.stopAll()
			r.assertNoSlotOverlap()
			r.assertNoOverlap() // the unsharded controller: one leader at a time
		})
	}
}

// allConverge waits until the ReplicaSet "web" of every namespace has
// want active pods and says so in its status.
func allConverge(t *testing.T, cs kubernetes.Interface, namespaces []string, want int) {
	t.Helper()
	var ns string
	var pods []corev1.Pod
	var replicas int32
	if !poll.For(rsTimeout, func() bool {
		for ; len(namespaces) > 0; namespaces = namespaces[1:] {
			ns = namespaces[0]
			var err error
			if pods, err = activePods(t.Context(), cs, ns, "web"); err != nil {
				t.Fatal(err)
			}
			if replicas, err = replicatedKinds[0].status(t.Context(), cs, ns, "web"); err != nil {
				t.Fatal(err)
			}
			if len(pods) != want || int(replicas) != want {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("namespace %s: ReplicaSet web has %d active pods, status %d; want %d",
			ns, len(pods), replicas, want)
	}
}
