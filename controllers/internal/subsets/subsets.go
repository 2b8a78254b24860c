// Package subsets puts the subsets of an Endpoints in the form KCM gives
// them before it writes or mirrors them: KCM's grouping, and (with Repack)
// KCM's order.
//
// The grouping: an address is told apart by its IP and its target's UID
// (no target counts as an empty UID), and the first occurrence of each is
// the one kept, whatever other fields later ones carry. An address is not
// ready on a port if any subset lists it not ready with that port, and
// ready on it otherwise. The ports that carry exactly the same addresses,
// each with the same readiness, form one subset. Addresses listed in a
// subset without ports are carried by a port of their own that no subset
// lists: they form a subset without ports, or join the subset of the ports
// that carry exactly them. Within every subset, the ready and the not-ready
// addresses are ordered by the bytes of their IP, then by target UID, an
// address without a target first. The input is not modified.
//
// The order: Repack orders the ports of every subset, and the subsets, by
// the FNV-128a hash of their dump.ForHash rendering, as KCM does, so that
// what is written is byte for byte what KCM writes. Group leaves them in
// the order they are first seen in the input, for a caller that does not
// show the order of subsets or ports.
package subsets

//lint:file-ignore SA1019 Endpoints are deprecated, and what KCM still maintains and mirrors

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/dump"
)

// Repack is in grouped as Group groups it, with the ports of every subset
// and the subsets in KCM's order (by content hash). Never nil.
func Repack(in []corev1.EndpointSubset) []corev1.EndpointSubset {
	out := Group(in)
	for i := range out {
		sortByHash(out[i].Ports)
	}
	sortByHash(out)
	return out
}

// Group is in grouped as KCM groups it (see the package comment), the
// subsets in the order of the first port each has in the input (the
// subset of addresses without ports counting as having one where they are
// first listed), their ports in input order. Never nil; a subset's lists
// are nil where empty.
func Group(in []corev1.EndpointSubset) []corev1.EndpointSubset {
	c := carriage{kept: map[addrID]*corev1.EndpointAddress{},
		byPort: map[corev1.EndpointPort]map[*corev1.EndpointAddress]bool{}}
	for i := range in {
		ports := in[i].Ports
		if len(ports) == 0 {
			ports = []corev1.EndpointPort{portless}
		}
		for _, p := range ports {
			for j := range in[i].Addresses {
				c.carry(&in[i].Addresses[j], p, true)
			}
			for j := range in[i].NotReadyAddresses {
				c.carry(&in[i].NotReadyAddresses[j], p, false)
			}
		}
	}
	out := []corev1.EndpointSubset{}
	at := map[string]int{}
	for _, p := range c.ports {
		carried := c.byPort[p]
		key := carriedKey(carried)
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			out = append(out, subsetOf(carried))
		}
		if p.Port > 0 {
			out[i].Ports = append(out[i].Ports, p)
		}
	}
	return out
}

// portless is the port that carries the addresses listed without ports.
var portless = corev1.EndpointPort{Port: -1}

// addrID is what tells addresses apart.
type addrID struct {
	ip  string
	uid types.UID
}

func idOf(a *corev1.EndpointAddress) addrID {
	id := addrID{ip: a.IP}
	if a.TargetRef != nil {
		id.uid = a.TargetRef.UID
	}
	return id
}

// carriage is which addresses each port carries, with their readiness.
type carriage struct {
	// kept is the first occurrence of every address.
	kept   map[addrID]*corev1.EndpointAddress
	byPort map[corev1.EndpointPort]map[*corev1.EndpointAddress]bool
	// ports are the keys of byPort, in the order first seen.
	ports []corev1.EndpointPort
}

// carry notes that port p carries a, not ready if ready is false or if it
// was noted not ready on p before.
func (c *carriage) carry(a *corev1.EndpointAddress, p corev1.EndpointPort, ready bool) {
	id := idOf(a)
	first, ok := c.kept[id]
	if !ok {
		first = a
		c.kept[id] = a
	}
	carried, ok := c.byPort[p]
	if !ok {
		carried = map[*corev1.EndpointAddress]bool{}
		c.byPort[p] = carried
		c.ports = append(c.ports, p)
	}
	if was, seen := carried[first]; !seen || was {
		carried[first] = ready
	}
}

// subsetOf is a subset without ports holding copies of the carried
// addresses, ordered.
func subsetOf(carried map[*corev1.EndpointAddress]bool) corev1.EndpointSubset {
	var s corev1.EndpointSubset
	for a, ready := range carried {
		if ready {
			s.Addresses = append(s.Addresses, *a)
		} else {
			s.NotReadyAddresses = append(s.NotReadyAddresses, *a)
		}
	}
	slices.SortFunc(s.Addresses, compareAddresses)
	slices.SortFunc(s.NotReadyAddresses, compareAddresses)
	return s
}

// carriedKey is the same string for two sets of addresses with their
// readiness exactly when they hold the same addresses, equally ready.
func carriedKey(carried map[*corev1.EndpointAddress]bool) string {
	parts := make([]string, 0, len(carried))
	for a, ready := range carried {
		id := idOf(a)
		parts = append(parts, fmt.Sprintf("%q %q %t", id.ip, id.uid, ready))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// compareAddresses orders addresses by the bytes of their IP, then by
// target UID, one without a target first. Two addresses Group keeps apart
// never compare equal.
func compareAddresses(a, b corev1.EndpointAddress) int {
	if c := bytes.Compare([]byte(a.IP), []byte(b.IP)); c != 0 {
		return c
	}
	switch {
	case a.TargetRef == nil && b.TargetRef == nil:
		return 0
	case a.TargetRef == nil:
		return -1
	case b.TargetRef == nil:
		return 1
	}
	return strings.Compare(string(a.TargetRef.UID), string(b.TargetRef.UID))
}

// sortByHash orders items in place by the FNV-128a hash of their
// dump.ForHash rendering; items with the same rendering keep their order.
func sortByHash[T any](items []T) {
	type hashed struct {
		sum  []byte
		item T
	}
	all := make([]hashed, len(items))
	for i, item := range items {
		h := fnv.New128a()
		fmt.Fprintf(h, "%v", dump.ForHash(item))
		all[i] = hashed{sum: h.Sum(nil), item: item}
	}
	slices.SortStableFunc(all, func(x, y hashed) int { return bytes.Compare(x.sum, y.sum) })
	for i := range all {
		items[i] = all[i].item
	}
}
