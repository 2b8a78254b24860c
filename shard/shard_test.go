package shard

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			UID:       types.UID(ns + "/" + name + "-uid"),
		},
	}
}

// TestSlotsAgreeWithTheServer: an object's slot is the one whose selector
// range the API server's own matcher (k8s.io/apimachinery/pkg/sharding)
// puts it in, for both keyings and several slot counts.
func TestSlotsAgreeWithTheServer(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, slots := range []int{1, 2, 3, 7, 16, 100, MaxSlots} {
		for _, keying := range []Keying{ByNamespace, ByUID} {
			sp := Space{Slots: slots, Keying: keying}
			for i := range 300 {
				p := pod(fmt.Sprintf("ns-%d", rng.IntN(1000)), fmt.Sprintf("p-%d", i))
				got, err := sp.SlotOf(p)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range []int{got - 1, got, got + 1} { // the neighbours are enough
					if s < 0 || s >= slots {
						continue
					}
					match, err := sp.Selector([]int{s}).Matches(p)
					if err != nil {
						t.Fatal(err)
					}
					if match != (s == got) {
						t.Fatalf(
							"Space{%d, %v}: object %s/%s in slot %d by SlotOf, server matcher says slot %d: %v",
							slots,
							keying,
							p.Namespace,
							p.Name,
							got,
							s,
							match,
						)
					}
				}
			}
		}
	}
}

func TestSlotOfHashAtTheBounds(t *testing.T) {
	for _, slots := range []int{3, 7, 16, 1000} {
		sp := Space{Slots: slots}
		for i := range slots {
			b := sp.bound(i)
			if got := sp.slotOfHash(b); got != i {
				t.Errorf("Space{%d}: first hash of slot %d lands in %d", slots, i, got)
			}
			if i > 0 {
				if got := sp.slotOfHash(b - 1); got != i-1 {
					t.Errorf("Space{%d}: last hash of slot %d lands in %d", slots, i-1, got)
				}
			}
		}
		if got := sp.slotOfHash(^uint64(0)); got != slots-1 {
			t.Errorf("Space{%d}: the largest hash lands in %d", slots, got)
		}
	}
}

func TestSelector(t *testing.T) {
	sp := Space{Slots: 4}
	for _, tc := range []struct {
		slots []int
		want  string
	}{
		{[]int{0, 1, 2, 3}, ""},
		{[]int{1}, "shardRange(object.metadata.namespace, '0x4000000000000000', '0x8000000000000000')"},
		{[]int{3, 2}, "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"},
		{[]int{0, 2, 3, 0}, "shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000') || " +
			"shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')"},
		{nil, "shardRange(object.metadata.namespace, '0x0000000000000000', '0x0000000000000000')"},
	} {
		if got := sp.Selector(tc.slots).String(); got != tc.want {
			t.Errorf("Selector(%v) = %q, want %q", tc.slots, got, tc.want)
		}
	}
	if m, _ := sp.Selector(nil).Matches(pod("a", "b")); m {
		t.Error("the selector of no slot matched an object")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		s  Space
		ok bool
	}{
		{Space{Slots: DefaultSlots}, true},
		{Space{Slots: 0}, false},
		{Space{Slots: MaxSlots + 1}, false},
		{Space{Slots: 4, Keying: 7}, false},
	} {
		if err := tc.s.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v", tc.s, err)
		}
	}
}
