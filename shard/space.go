package shard

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/sharding"
)

// Keying says which field of an object is its key.
type Keying int

const (
	// ByNamespace keys an object by its namespace: everything of one
	// namespace lands in one slot.
	ByNamespace Keying = iota
	// ByUID keys an object by its UID: the finest spread, for controllers
	// whose work on one object never needs another's.
	ByUID
)

// Field is the key's field path as the API server's shard selector names
// it.
func (k Keying) Field() string {
	if k == ByUID {
		return "object.metadata.uid"
	}
	return "object.metadata.namespace"
}

func (k Keying) String() string {
	if k == ByUID {
		return "uid"
	}
	return "namespace"
}

// DefaultSlots is the default number of slots (--shard-slots): enough to
// balance up to eight replicas within one slot of each other, few enough
// that a replica holds a handful of slot leases.
const DefaultSlots = 16

// MaxSlots bounds Slots: every slot is a lease renewed every few seconds.
const MaxSlots = 1024

// Space is the key space of a sharded controller.
type Space struct {
	Slots  int
	Keying Keying
}

// Validate reports a Space that cannot be used, naming the flag.
func (s Space) Validate() error {
	if err := (Options{Slots: s.Slots}).Validate(); err != nil {
		return err
	}
	if s.Keying != ByNamespace && s.Keying != ByUID {
		return fmt.Errorf("shard keying %d is unknown; use ByNamespace or ByUID", s.Keying)
	}
	return nil
}

// bound returns the first hash of slot i, for 0 <= i < Slots:
// ⌊i·2⁶⁴/Slots⌋.
func (s Space) bound(i int) uint64 {
	q, _ := bits.Div64(uint64(i), 0, uint64(s.Slots))
	return q
}

// Range returns slot i's hash range [start, end) as the selector writes it.
func (s Space) Range(i int) (start, end string) {
	start = fmt.Sprintf("0x%016x", s.bound(i))
	if i+1 == s.Slots {
		return start, "0x10000000000000000"
	}
	return start, fmt.Sprintf("0x%016x", s.bound(i+1))
}

// SlotOfKey returns the slot of a key value (a namespace or a UID).
func (s Space) SlotOfKey(value string) int {
	h := fnv.New64a()
	h.Write([]byte(value))
	return s.slotOfHash(h.Sum64())
}

func (s Space) slotOfHash(hash uint64) int {
	// ⌊hash·Slots/2⁶⁴⌋ is the slot or its neighbour (the bounds are
	// rounded down); the bounds decide, as the API server's ranges do.
	i, _ := bits.Mul64(hash, uint64(s.Slots))
	slot := int(i)
	for slot > 0 && hash < s.bound(slot) {
		slot--
	}
	for slot+1 < s.Slots && hash >= s.bound(slot+1) {
		slot++
	}
	return slot
}

// key returns obj's key under s's keying.
func (s Space) key(obj runtime.Object) (string, error) {
	a, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	if s.Keying == ByUID {
		return string(a.GetUID()), nil
	}
	return a.GetNamespace(), nil
}

// SlotOf returns obj's slot.
func (s Space) SlotOf(obj runtime.Object) (int, error) {
	k, err := s.key(obj)
	if err != nil {
		return 0, err
	}
	return s.SlotOfKey(k), nil
}

// Selector returns the shard selector of the given slots
// (ListOptions.ShardSelector): one shardRange per run of adjacent slots,
// joined with "||". It returns "" (everything) when slots covers the
// whole space.
func (s Space) Selector(slots []int) sharding.Selector {
	held := slices.Sorted(slices.Values(slots))
	held = slices.Compact(held)
	if len(held) == s.Slots {
		return sharding.Everything()
	}
	var reqs []sharding.ShardRangeRequirement
	for i := 0; i < len(held); {
		j := i
		for j+1 < len(held) && held[j+1] == held[j]+1 {
			j++
		}
		start, _ := s.Range(held[i])
		_, end := s.Range(held[j])
		reqs = append(
			reqs,
			sharding.ShardRangeRequirement{Key: s.Keying.Field(), Start: start, End: end},
		)
		i = j + 1
	}
	if len(reqs) == 0 {
		// No slot: a range no hash is in.
		return sharding.NewSelector(
			sharding.ShardRangeRequirement{
				Key:   s.Keying.Field(),
				Start: "0x0000000000000000",
				End:   "0x0000000000000000",
			},
		)
	}
	return sharding.NewSelector(reqs...)
}
