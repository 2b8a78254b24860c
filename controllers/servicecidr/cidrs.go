package servicecidr

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	netutils "k8s.io/utils/net"
)

// allocatorName is the kube-apiserver's IP allocator, in the managed-by
// label of the IPAddresses it allocates: the only ones the controller
// counts.
const allocatorName = "ipallocator.k8s.io"

// matching returns, once per matching range, every cached ServiceCIDR
// with a range for which match holds (a ServiceCIDR appears once for each
// of its ranges that matches). A range that does not parse matches
// nothing; a lister that cannot list gives nothing.
func matching(lister networkinglisters.ServiceCIDRLister,
	match func(netip.Prefix) bool) []*networkingv1.ServiceCIDR {
	all, err := lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*networkingv1.ServiceCIDR
	for _, sc := range all {
		for _, cidr := range sc.Spec.CIDRs {
			if p, err := netip.ParsePrefix(cidr); err == nil && match(p) {
				out = append(out, sc)
			}
		}
	}
	return out
}

// overlapping: the ServiceCIDRs with a range that shares an address with
// prefix.
func overlapping(lister networkinglisters.ServiceCIDRLister,
	prefix netip.Prefix) []*networkingv1.ServiceCIDR {
	return matching(lister, func(p netip.Prefix) bool { return p.Overlaps(prefix) })
}

// covering: the ServiceCIDRs with a range that holds all of prefix (the
// same range counts).
func covering(lister networkinglisters.ServiceCIDRLister,
	prefix netip.Prefix) []*networkingv1.ServiceCIDR {
	return matching(lister, func(p netip.Prefix) bool {
		return p.Overlaps(prefix) && p.Bits() <= prefix.Bits()
	})
}

// holding: the ServiceCIDRs with a range that could have allocated addr.
func holding(lister networkinglisters.ServiceCIDRLister,
	addr netip.Addr) []*networkingv1.ServiceCIDR {
	return matching(lister, func(p netip.Prefix) bool { return allocatable(p, addr) })
}

// allocatable: addr is in prefix and is neither its network address nor,
// for IPv4, its broadcast address: the addresses a range hands out.
func allocatable(prefix netip.Prefix, addr netip.Addr) bool {
	if !prefix.Contains(addr) || prefix.Masked().Addr() == addr {
		return false
	}
	return !addr.Is4() || addr != lastAddress(prefix)
}

// lastAddress is prefix's address with every host bit set.
func lastAddress(prefix netip.Prefix) netip.Addr {
	b := prefix.Masked().Addr().AsSlice()
	for i := prefix.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// family is the IP family of a range, as the IPAddress family label says
// it; "" for a range that does not parse.
func family(cidr string) corev1.IPFamily {
	switch netutils.IPFamilyOfCIDRString(cidr) {
	case netutils.IPv4:
		return corev1.IPv4Protocol
	case netutils.IPv6:
		return corev1.IPv6Protocol
	}
	return ""
}

// names are the names of scs, each once, in order.
func names(scs []*networkingv1.ServiceCIDR) []string {
	var out []string
	seen := map[string]bool{}
	for _, sc := range scs {
		if !seen[sc.Name] {
			seen[sc.Name] = true
			out = append(out, sc.Name)
		}
	}
	return out
}
