package endpoints

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller maintains (as KCM's)

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

// repack merges subsets into the canonical form KCM writes: every address
// (told apart by IP and target UID) appears once per distinct port set; an
// address is ready on a port only if it is ready in every subset listing it
// with that port; addresses sharing exactly the same ports form one subset.
// Addresses are ordered by IP then UID, ports and subsets by the hash KCM
// orders them by, so that the result (and thus the object written) is the
// same as KCM's.
func repack(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	type addrID struct {
		ip  string
		uid types.UID
	}
	// noPort stands for "no ports" (headless Services without ports).
	noPort := corev1.EndpointPort{Port: -1}
	addrs := map[addrID]*corev1.EndpointAddress{}
	byPort := map[corev1.EndpointPort]map[*corev1.EndpointAddress]bool{}
	var portOrder []corev1.EndpointPort
	note := func(a *corev1.EndpointAddress, port corev1.EndpointPort, ready bool) {
		id := addrID{ip: a.IP}
		if a.TargetRef != nil {
			id.uid = a.TargetRef.UID
		}
		one := addrs[id]
		if one == nil {
			cp := *a
			one = &cp
			addrs[id] = one
		}
		set, ok := byPort[port]
		if !ok {
			set = map[*corev1.EndpointAddress]bool{}
			byPort[port] = set
			portOrder = append(portOrder, port)
		}
		if was, seen := set[one]; !seen || was {
			set[one] = ready
		}
	}
	for i := range subsets {
		ports := subsets[i].Ports
		if len(ports) == 0 {
			ports = []corev1.EndpointPort{noPort}
		}
		for _, p := range ports {
			for k := range subsets[i].Addresses {
				note(&subsets[i].Addresses[k], p, true)
			}
			for k := range subsets[i].NotReadyAddresses {
				note(&subsets[i].NotReadyAddresses[k], p, false)
			}
		}
	}

	// Group the ports by the exact set of (address, readiness) they carry.
	type group struct {
		set   map[*corev1.EndpointAddress]bool
		ports []corev1.EndpointPort
	}
	groups := map[string]*group{}
	var keys []string
	for _, port := range portOrder {
		set := byPort[port]
		key := setKey(set)
		g, ok := groups[key]
		if !ok {
			g = &group{set: set}
			groups[key] = g
			keys = append(keys, key)
		}
		if port.Port > 0 {
			g.ports = append(g.ports, port)
		}
	}
	out := []corev1.EndpointSubset{}
	for _, key := range keys {
		g := groups[key]
		var ready, notReady []corev1.EndpointAddress
		for a, r := range g.set {
			if r {
				ready = append(ready, *a)
			} else {
				notReady = append(notReady, *a)
			}
		}
		out = append(out, corev1.EndpointSubset{Addresses: ready, NotReadyAddresses: notReady, Ports: g.ports})
	}
	return sortSubsets(out)
}

// setKey identifies a set of (address, readiness) pairs.
func setKey(set map[*corev1.EndpointAddress]bool) string {
	parts := make([]string, 0, len(set))
	for a, r := range set {
		uid := types.UID("")
		if a.TargetRef != nil {
			uid = a.TargetRef.UID
		}
		parts = append(parts, fmt.Sprintf("%q/%q/%t", a.IP, uid, r))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// sortSubsets orders addresses by IP then target UID, and ports and subsets
// by their content hash, in place.
func sortSubsets(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	for i := range subsets {
		s := &subsets[i]
		slices.SortStableFunc(s.Addresses, compareAddress)
		slices.SortStableFunc(s.NotReadyAddresses, compareAddress)
		sortByHash(s.Ports)
	}
	sortByHash(subsets)
	return subsets
}

func compareAddress(a, b corev1.EndpointAddress) int {
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

// sortByHash orders items by the FNV-128a hash of their dump.ForHash
// rendering, the order KCM keeps subsets and ports in.
func sortByHash[T any](items []T) {
	hashes := make(map[int][]byte, len(items))
	idx := make([]int, len(items))
	for i := range items {
		idx[i] = i
		hashes[i] = contentHash(items[i])
	}
	slices.SortStableFunc(idx, func(a, b int) int { return bytes.Compare(hashes[a], hashes[b]) })
	sorted := make([]T, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
}

func contentHash(v any) []byte {
	h := fnv.New128a()
	fmt.Fprintf(h, "%v", dump.ForHash(v))
	return h.Sum(nil)
}
