package shardgroup

import (
	"hash/fnv"
	"slices"
	"strconv"
)

// Assign returns, for each of slots slots, the member that should own it,
// given the live members' identities (in any order; duplicates count
// once). Every member computes the same answer from the same members.
//
// It is rendezvous hashing with bounded loads: slot by slot, the member
// with the highest score hash(member, slot) that still has room takes it,
// where room is ⌈S/M⌉ for the first S mod M members to fill up and ⌊S/M⌋
// for the rest. So every member owns ⌊S/M⌋ or ⌈S/M⌉ slots, and a member
// joining or leaving moves mostly the slots it takes or gives (not the
// whole table, as a modulo assignment would). With no members it returns
// a table of "".
func Assign(members []string, slots int) []string {
	ms := slices.Compact(slices.Sorted(slices.Values(members)))
	owners := make([]string, slots)
	if len(ms) == 0 || slots <= 0 {
		return owners
	}
	lo, extra := slots/len(ms), slots%len(ms)
	load := make(map[string]int, len(ms))
	full := 0 // members that reached lo+1
	scores := make([]uint64, len(ms))
	order := make([]int, len(ms))
	for s := range slots {
		for i, m := range ms {
			scores[i] = score(m, s)
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int {
			switch {
			case scores[a] > scores[b]:
				return -1
			case scores[a] < scores[b]:
				return 1
			}
			return 0
		})
		for _, i := range order {
			m := ms[i]
			room := lo
			if full < extra || load[m] == lo+1 {
				room = lo + 1
			}
			if load[m] < room {
				load[m]++
				if load[m] == lo+1 {
					full++
				}
				owners[s] = m
				break
			}
		}
	}
	return owners
}

func score(member string, slot int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(slot)))
	// FNV-1a mixes its last bytes weakly; finish with a 64-bit mixer so
	// that neighbouring slots score independently.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Owned returns the slots owners gives member.
func Owned(owners []string, member string) []int {
	var out []int
	for s, m := range owners {
		if m == member {
			out = append(out, s)
		}
	}
	return out
}

// Balanced reports whether holders (slot → holder identity, as the slot
// Leases name them) is what a settled group of members looks like: each of
// the slots is held, by one of members, and every member holds ⌊S/M⌋ or
// ⌈S/M⌉ of them, as Assign gives them. Tests and probes use it to wait
// for a group to settle after a member joined or left.
func Balanced(holders map[int]string, slots int, members []string) bool {
	ms := slices.Compact(slices.Sorted(slices.Values(members)))
	if len(ms) == 0 {
		return false
	}
	count := make(map[string]int, len(ms))
	for s := range slots {
		h := holders[s]
		if !slices.Contains(ms, h) {
			return false
		}
		count[h]++
	}
	lo := slots / len(ms)
	for _, m := range ms {
		if n := count[m]; n < lo || n > lo+1 {
			return false
		}
	}
	return true
}
