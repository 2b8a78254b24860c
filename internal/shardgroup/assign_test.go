package shardgroup

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ctrlhost/ctrlhost/shard"
)

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			UID:       types.UID(ns + "/" + name + "-uid"),
		},
	}
}

func identities(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("replica-%d", i))
	}
	return out
}

// TestAssignBalances: every member owns ⌊S/M⌋ or ⌈S/M⌉ slots, every slot
// has an owner, and the answer does not depend on the members' order.
func TestAssignBalances(t *testing.T) {
	for _, slots := range []int{1, 5, 16, 64} {
		for m := 1; m <= 10; m++ {
			ms := identities(m)
			owners := Assign(ms, slots)
			rev := slices.Clone(ms)
			slices.Reverse(rev)
			if !slices.Equal(owners, Assign(append(rev, rev[0]), slots)) {
				t.Errorf(
					"S=%d M=%d: the member order (or a duplicate) changed the assignment",
					slots,
					m,
				)
			}
			for _, id := range ms {
				n := len(Owned(owners, id))
				if n != slots/m && n != (slots+m-1)/m {
					t.Errorf("S=%d M=%d: %s owns %d slots", slots, m, id, n)
				}
			}
			if slices.Contains(owners, "") {
				t.Errorf("S=%d M=%d: a slot without owner: %q", slots, m, owners)
			}
		}
	}
	if got := Assign(nil, 3); !slices.Equal(got, []string{"", "", ""}) {
		t.Errorf("no members: %q", got)
	}
}

// TestBalanced: what Assign gives is balanced; a slot unheld, held by a
// stranger, or a member with too many or too few slots is not.
func TestBalanced(t *testing.T) {
	members := []string{"a", "b", "c"}
	table := func(owners ...string) map[int]string {
		out := map[int]string{}
		for i, o := range owners {
			if o != "" {
				out[i] = o
			}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		holders map[int]string
		want    bool
	}{
		{"Assign's", table(Assign(members, 8)...), true},
		{"by hand", table("a", "b", "c", "a", "b", "c", "a", "b"), true},
		{"a slot unheld", table("a", "b", "c", "a", "b", "c", "a", ""), false},
		{"a stranger holds one", table("a", "b", "c", "a", "b", "c", "a", "x"), false},
		{"a holds too many", table("a", "a", "a", "a", "b", "c", "b", "c"), false},
		{"c holds none", table("a", "b", "a", "b", "a", "b", "a", "b"), false},
	} {
		if got := Balanced(tc.holders, 8, members); got != tc.want {
			t.Errorf("%s: Balanced(%v) = %v, want %v", tc.name, tc.holders, got, tc.want)
		}
	}
	if Balanced(map[int]string{}, 4, nil) {
		t.Error("Balanced with no members = true")
	}
}

// TestAssignMovesFew: a member joining takes its share from the others
// and only a little more moves around; one leaving gives its slots away.
// Modulo assignment would move most of the table.
func TestAssignMovesFew(t *testing.T) {
	const slots = 16
	for m := 1; m <= 8; m++ {
		before, after := Assign(identities(m), slots), Assign(identities(m+1), slots)
		moved := 0
		for s := range slots {
			if before[s] != after[s] {
				moved++
			}
		}
		share := len(Owned(after, fmt.Sprintf("replica-%d", m)))
		t.Logf(
			"S=%d, %d → %d members: %d slots moved, the newcomer's share %d",
			slots,
			m,
			m+1,
			moved,
			share,
		)
		if moved > 2*share+1 {
			t.Errorf("%d → %d members: %d slots moved for a share of %d", m, m+1, moved, share)
		}
	}
}

// TestNamespaceSpread measures what package shard's doc says of the API
// server's hash: sequential names cluster in a few slots, generated ones
// spread.
func TestNamespaceSpread(t *testing.T) {
	sp := shard.Space{Slots: 16}
	used := func(name func(int) string) int {
		seen := map[int]bool{}
		for i := range 100 {
			seen[sp.SlotOfKey(name(i))] = true
		}
		return len(seen)
	}
	seq := used(func(i int) string { return fmt.Sprintf("ns-%d", i) })
	gen := used(func(i int) string { return generated("ns-", i) })
	t.Logf(
		"100 namespaces over 16 slots: sequential names use %d slots, generated names %d",
		seq,
		gen,
	)
	if seq > 4 || gen < 14 {
		t.Errorf(
			"sequential names use %d slots, generated %d; the package doc says 2 and 16",
			seq,
			gen,
		)
	}
}
