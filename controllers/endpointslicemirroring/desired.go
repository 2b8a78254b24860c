package endpointslicemirroring

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller mirrors (as KCM's)

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	esutil "k8s.io/endpointslice/util"
	netutils "k8s.io/utils/net"

	"github.com/ctrlhost/ctrlhost/controllers/internal/subsets"
)

// group is what one EndpointSlice mirrors: the endpoints of one address
// type sharing one set of ports.
type group struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	// set holds the endpoints by the library's identity (addresses,
	// hostname, target namespace and name): a later endpoint with the
	// identity of an earlier one replaces it, as in KCM.
	set esutil.EndpointSet
	// added is every endpoint inserted, in order; those still in set are
	// the group's endpoints.
	added []*discoveryv1.Endpoint
}

// endpoints returns the group's endpoints in the order they were added.
// KCM takes them out of the set in map order, which differs from run to
// run; this order is one of those.
func (g *group) endpoints() []discoveryv1.Endpoint {
	out := []discoveryv1.Endpoint{}
	for _, e := range g.added {
		if g.set.Get(e) == e {
			out = append(out, *e)
		}
	}
	return out
}

// desired is what an Endpoints is mirrored into, by group key.
type desired struct {
	groups map[groupKey]*group
	// invalid counts the addresses skipped for not being IPs; skipped
	// counts every address skipped, invalid or beyond the most per subset.
	invalid, skipped int
}

// groupKey identifies a group: its address type and its ports, as KCM
// keys them (an existing slice is matched to a group by it).
type groupKey string

func keyOf(ports []discoveryv1.EndpointPort, t discoveryv1.AddressType) groupKey {
	// NewPortMapKey sorts the ports it is given.
	return groupKey(fmt.Sprintf("%s-%s", t, esutil.NewPortMapKey(ports)))
}

// sliceKey is the key of an existing slice, computed on a copy of its
// ports (the cached slice is not reordered).
func sliceKey(s *discoveryv1.EndpointSlice) groupKey {
	ports := make([]discoveryv1.EndpointPort, len(s.Ports))
	for i := range s.Ports {
		s.Ports[i].DeepCopyInto(&ports[i])
	}
	return keyOf(ports, s.AddressType)
}

// mirror computes what ep is mirrored into, as KCM does: its subsets
// grouped as KCM groups them (subsets.Group; the order of subsets and
// ports is left as it comes: keyOf sorts the ports), each giving an IPv4
// and an IPv6 group over its ports (either may be empty: an empty group
// deletes the slices it had); in each subset the ready addresses, then the
// not-ready ones, up to limit of them per subset; addresses that are not
// IPs are skipped (and not counted).
func mirror(ep *corev1.Endpoints, limit int) desired {
	d := desired{groups: map[groupKey]*group{}}
	for _, sub := range subsets.Group(ep.Subsets) {
		ports := slicePorts(sub.Ports)
		keys := map[discoveryv1.AddressType]groupKey{}
		for _, t := range []discoveryv1.AddressType{
			discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
			k := keyOf(ports, t)
			keys[t] = k
			g, ok := d.groups[k]
			if !ok {
				g = &group{addressType: t, set: esutil.EndpointSet{}}
				d.groups[k] = g
			}
			g.ports = ports
		}
		added := 0
		for _, list := range []struct {
			addrs []corev1.EndpointAddress
			ready bool
		}{{sub.Addresses, true}, {sub.NotReadyAddresses, false}} {
			for _, a := range list.addrs {
				if added >= limit {
					break
				}
				e, t, ok := toEndpoint(a, list.ready)
				if !ok {
					d.invalid++
					continue
				}
				g := d.groups[keys[t]]
				g.set.Insert(e)
				g.added = append(g.added, e)
				added++
			}
		}
		d.skipped += len(sub.Addresses) + len(sub.NotReadyAddresses) - added
	}
	return d
}

// toEndpoint is an address as an EndpointSlice endpoint, with its address
// type; false if the address is not an IP. The IP is written in its
// canonical form; only the Ready condition is set.
func toEndpoint(a corev1.EndpointAddress, ready bool) (*discoveryv1.Endpoint,
	discoveryv1.AddressType, bool) {
	ip := netutils.ParseIPSloppy(a.IP)
	if ip == nil {
		return nil, "", false
	}
	t := discoveryv1.AddressTypeIPv4
	if ip.To4() == nil {
		t = discoveryv1.AddressTypeIPv6
	}
	e := &discoveryv1.Endpoint{
		Addresses:  []string{ip.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready},
	}
	if a.TargetRef != nil {
		ref := *a.TargetRef
		e.TargetRef = &ref
	}
	if a.NodeName != nil {
		node := *a.NodeName
		e.NodeName = &node
	}
	if a.Hostname != "" {
		host := a.Hostname
		e.Hostname = &host
	}
	return e, t, true
}

// slicePorts converts an Endpoints subset's ports (never nil: a subset
// without ports gets a slice with an empty list).
func slicePorts(in []corev1.EndpointPort) []discoveryv1.EndpointPort {
	out := []discoveryv1.EndpointPort{}
	for _, p := range in {
		p := *p.DeepCopy()
		out = append(out, discoveryv1.EndpointPort{
			Name: &p.Name, Port: &p.Port, Protocol: &p.Protocol, AppProtocol: p.AppProtocol})
	}
	return out
}

// newSlice is the EndpointSlice mirroring ep's group g: ep's labels (with
// the service-name and managed-by labels set), ep's annotations but the
// last-change trigger time and kubectl's last-applied configuration,
// controlled by ep. Named name, or generated from ep's name when name is
// empty. Its endpoints are left to the caller.
func newSlice(ep *corev1.Endpoints, g *group, name string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ep.Namespace,
			Labels:          maps.Clone(ep.Labels),
			Annotations:     withoutKeys(ep.Annotations, notMirrored...),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ep, endpointsKind)},
		},
		AddressType: g.addressType,
		Ports:       g.ports,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[discoveryv1.LabelServiceName] = ep.Name
	s.Labels[discoveryv1.LabelManagedBy] = ManagedBy
	if name == "" {
		s.GenerateName = namePrefix(ep.Name)
	} else {
		s.Name = name
	}
	return s
}

// notMirrored are the annotations of an Endpoints a slice does not get.
var notMirrored = []string{
	corev1.EndpointsLastChangeTriggerTime, corev1.LastAppliedConfigAnnotation}

// withoutKeys is a copy of m (never nil) without keys.
func withoutKeys(m map[string]string, keys ...string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !slices.Contains(keys, k) {
			out[k] = v
		}
	}
	return out
}

// namePrefix is the generateName of a new slice: the Endpoints' name and a
// dash, or the name alone where the dash would make too long a name.
func namePrefix(name string) string {
	if len(apivalidation.NameIsDNSSubdomain(name+"-", true)) == 0 {
		return name + "-"
	}
	return name
}
