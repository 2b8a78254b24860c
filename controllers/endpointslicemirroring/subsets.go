package endpointslicemirroring

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller mirrors (as KCM's)

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// subset is one subset of an Endpoints in canonical form.
type subset struct {
	ports           []corev1.EndpointPort
	ready, notReady []corev1.EndpointAddress
}

// canonicalSubsets regroups subsets as KCM does before it mirrors them: an
// address (told apart by IP and target UID; its first occurrence is kept)
// is not ready on a port if any subset lists it not ready with that port;
// the ports that carry exactly the same addresses, with the same
// readiness, form one subset (addresses listed without ports count as
// carried by a port of their own, that no subset lists). Addresses are in
// KCM's order, by IP then target UID, which decides which of them are
// mirrored when a subset has more than the most allowed. The order of the
// subsets and of their ports is not KCM's: it does not show in what is
// mirrored.
func canonicalSubsets(in []corev1.EndpointSubset) []subset {
	type addrID struct {
		ip  string
		uid types.UID
	}
	noPorts := corev1.EndpointPort{Port: -1}
	addrs := map[addrID]*corev1.EndpointAddress{}
	byPort := map[corev1.EndpointPort]map[*corev1.EndpointAddress]bool{}
	var portOrder []corev1.EndpointPort
	note := func(a *corev1.EndpointAddress, port corev1.EndpointPort, ready bool) {
		id := addrID{ip: a.IP}
		if a.TargetRef != nil {
			id.uid = a.TargetRef.UID
		}
		kept := addrs[id]
		if kept == nil {
			kept = a
			addrs[id] = a
		}
		carried, ok := byPort[port]
		if !ok {
			carried = map[*corev1.EndpointAddress]bool{}
			byPort[port] = carried
			portOrder = append(portOrder, port)
		}
		if was, seen := carried[kept]; !seen || was {
			carried[kept] = ready
		}
	}
	for i := range in {
		ports := in[i].Ports
		if len(ports) == 0 {
			ports = []corev1.EndpointPort{noPorts}
		}
		for _, p := range ports {
			for j := range in[i].Addresses {
				note(&in[i].Addresses[j], p, true)
			}
			for j := range in[i].NotReadyAddresses {
				note(&in[i].NotReadyAddresses[j], p, false)
			}
		}
	}
	groups := map[string]*subset{}
	var order []string
	for _, port := range portOrder {
		carried := byPort[port]
		key := carriedKey(carried)
		g, ok := groups[key]
		if !ok {
			g = &subset{}
			for a, ready := range carried {
				if ready {
					g.ready = append(g.ready, *a)
				} else {
					g.notReady = append(g.notReady, *a)
				}
			}
			slices.SortFunc(g.ready, compareAddresses)
			slices.SortFunc(g.notReady, compareAddresses)
			groups[key] = g
			order = append(order, key)
		}
		if port.Port > 0 {
			g.ports = append(g.ports, port)
		}
	}
	out := make([]subset, 0, len(order))
	for _, key := range order {
		out = append(out, *groups[key])
	}
	return out
}

// carriedKey names a set of addresses with their readiness.
func carriedKey(carried map[*corev1.EndpointAddress]bool) string {
	parts := make([]string, 0, len(carried))
	for a, ready := range carried {
		var uid types.UID
		if a.TargetRef != nil {
			uid = a.TargetRef.UID
		}
		parts = append(parts, fmt.Sprintf("%q %q %t", a.IP, uid, ready))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// compareAddresses orders addresses by the bytes of their IP, then by
// target UID, one without a target first: KCM's order.
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
