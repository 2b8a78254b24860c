package subsets

//lint:file-ignore SA1019 Endpoints are deprecated, and what KCM still maintains and mirrors

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// addr is the address of the pod with UID uid.
func addr(ip string, uid types.UID) corev1.EndpointAddress {
	return corev1.EndpointAddress{IP: ip, TargetRef: &corev1.ObjectReference{
		Kind: "Pod", Namespace: "ns", Name: string(uid), UID: uid}}
}

func port(name string, n int32) corev1.EndpointPort {
	return corev1.EndpointPort{Name: name, Port: n, Protocol: corev1.ProtocolTCP}
}

func sub(ready, notReady []corev1.EndpointAddress,
	ports ...corev1.EndpointPort) corev1.EndpointSubset {
	return corev1.EndpointSubset{Addresses: ready, NotReadyAddresses: notReady, Ports: ports}
}

func list(a ...corev1.EndpointAddress) []corev1.EndpointAddress { return a }

// renderSubset is "ready|notReady|ports": addresses as IP/UID (IP alone
// without a target) in the subset's order, ports as name=port; ports in
// the subset's order, or sorted by name if sortPorts.
func renderSubset(s corev1.EndpointSubset, sortPorts bool) string {
	addrs := func(l []corev1.EndpointAddress) string {
		var out []string
		for _, a := range l {
			if a.TargetRef == nil {
				out = append(out, a.IP)
			} else {
				out = append(out, a.IP+"/"+string(a.TargetRef.UID))
			}
		}
		return strings.Join(out, ",")
	}
	var ports []string
	for _, p := range s.Ports {
		ports = append(ports, fmt.Sprintf("%s=%d", p.Name, p.Port))
	}
	if sortPorts {
		slices.Sort(ports)
	}
	return addrs(s.Addresses) + "|" + addrs(s.NotReadyAddresses) + "|" + strings.Join(ports, ",")
}

// render is the subsets in their order, separated by ";".
func render(l []corev1.EndpointSubset) string {
	var out []string
	for _, s := range l {
		out = append(out, renderSubset(s, false))
	}
	return strings.Join(out, ";")
}

// renderContent is the subsets without their order or that of their
// ports: sorted, separated by ";".
func renderContent(l []corev1.EndpointSubset) string {
	var out []string
	for _, s := range l {
		out = append(out, renderSubset(s, true))
	}
	slices.Sort(out)
	return strings.Join(out, ";")
}

// TestGrouping: what Group and Repack both give, orders of subsets and
// ports aside.
func TestGrouping(t *testing.T) {
	a1, a2, a10 := addr("10.0.0.1", "a"), addr("10.0.0.2", "b"), addr("10.0.0.10", "j")
	noTarget := corev1.EndpointAddress{IP: "10.0.0.1"}
	http, metrics := port("http", 80), port("metrics", 90)
	tests := []struct {
		name string
		in   []corev1.EndpointSubset
		want string
	}{
		{"nothing", nil, ""},
		{"no subsets", []corev1.EndpointSubset{}, ""},
		{"a subset without addresses", []corev1.EndpointSubset{sub(nil, nil, http)}, ""},
		{"same ports merge, addresses in the byte order of their IPs",
			[]corev1.EndpointSubset{sub(list(a2), nil, http), sub(list(a10, a1), nil, http)},
			"10.0.0.1/a,10.0.0.10/j,10.0.0.2/b||http=80"},
		{"an address on two ports: one subset with both",
			[]corev1.EndpointSubset{sub(list(a1), nil, http), sub(list(a1), nil, metrics)},
			"10.0.0.1/a||http=80,metrics=90"},
		{"one subset listing both ports",
			[]corev1.EndpointSubset{sub(list(a2, a1), nil, metrics, http)},
			"10.0.0.1/a,10.0.0.2/b||http=80,metrics=90"},
		{"ready and not ready on a port: not ready",
			[]corev1.EndpointSubset{sub(list(a1), nil, http), sub(nil, list(a1), http)},
			"|10.0.0.1/a|http=80"},
		{"not ready, then ready on a port: not ready",
			[]corev1.EndpointSubset{sub(nil, list(a1), http), sub(list(a1), nil, http)},
			"|10.0.0.1/a|http=80"},
		{"not ready on one of two ports: two subsets",
			[]corev1.EndpointSubset{sub(list(a1), nil, http, metrics), sub(nil, list(a1), http)},
			"10.0.0.1/a||metrics=90;|10.0.0.1/a|http=80"},
		{"ports carrying the same addresses but not equally ready stay apart",
			[]corev1.EndpointSubset{sub(list(a1), list(a2), http), sub(list(a1, a2), nil, metrics)},
			"10.0.0.1/a,10.0.0.2/b||metrics=90;10.0.0.1/a|10.0.0.2/b|http=80"},
		{"same IP, other targets: apart, no target first, then by UID",
			[]corev1.EndpointSubset{
				sub(list(addr("10.0.0.1", "z"), a1, noTarget), nil, http)},
			"10.0.0.1,10.0.0.1/a,10.0.0.1/z||http=80"},
		{"a target with an empty UID is no target",
			[]corev1.EndpointSubset{sub(list(noTarget, addr("10.0.0.1", "")), nil, http)},
			"10.0.0.1||http=80"},
		{"no ports", []corev1.EndpointSubset{sub(list(a1), nil), sub(nil, list(a2))},
			"10.0.0.1/a|10.0.0.2/b|"},
		{"addresses without ports join the ports carrying exactly them",
			[]corev1.EndpointSubset{sub(list(a1), nil), sub(list(a1), nil, http)},
			"10.0.0.1/a||http=80"},
		{"addresses without ports no port carries exactly stay apart",
			[]corev1.EndpointSubset{sub(list(a1), nil), sub(list(a1, a2), nil, http)},
			"10.0.0.1/a,10.0.0.2/b||http=80;10.0.0.1/a||"},
	}
	for _, tt := range tests {
		for _, f := range []struct {
			name string
			do   func([]corev1.EndpointSubset) []corev1.EndpointSubset
		}{{"Group", Group}, {"Repack", Repack}} {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				out := f.do(tt.in)
				if got := renderContent(out); got != tt.want {
					t.Errorf("got %q, want %q", got, tt.want)
				}
				if out == nil {
					t.Error("nil, want an empty list (KCM writes [])")
				}
			})
		}
	}
}

// TestFirstOccurrenceKept: of an address listed more than once, the first
// listing is the one kept, whatever the later ones say.
func TestFirstOccurrenceKept(t *testing.T) {
	first, second, third := addr("10.0.0.5", "p"), addr("10.0.0.5", "p"), addr("10.0.0.5", "p")
	first.Hostname, second.Hostname, third.Hostname = "first", "second", "third"
	node := "node-2"
	second.NodeName = &node
	in := []corev1.EndpointSubset{
		sub(list(first), nil, port("http", 80)),
		sub(list(second), nil, port("http", 80)),
		sub(nil, list(third), port("metrics", 90)),
	}
	for name, do := range map[string]func([]corev1.EndpointSubset) []corev1.EndpointSubset{
		"Group": Group, "Repack": Repack} {
		var got []corev1.EndpointAddress
		for _, s := range do(in) {
			got = append(got, s.Addresses...)
			got = append(got, s.NotReadyAddresses...)
		}
		if len(got) != 2 {
			t.Fatalf("%s: %d addresses, want 2", name, len(got))
		}
		for _, a := range got {
			if a.Hostname != "first" || a.NodeName != nil {
				t.Errorf("%s: kept %+v, want the first occurrence", name, a)
			}
		}
	}
}

// TestInputUnchanged: neither function modifies what it is given, and
// what they return does not share its lists with it.
func TestInputUnchanged(t *testing.T) {
	in := []corev1.EndpointSubset{
		sub(list(addr("10.0.0.2", "b"), addr("10.0.0.1", "a")), nil,
			port("z", 2), port("a", 1)),
		sub(nil, list(addr("10.0.0.3", "c")), port("a", 1)),
	}
	was := []corev1.EndpointSubset{*in[0].DeepCopy(), *in[1].DeepCopy()}
	for name, do := range map[string]func([]corev1.EndpointSubset) []corev1.EndpointSubset{
		"Group": Group, "Repack": Repack} {
		out := do(in)
		if !reflect.DeepEqual(in, was) {
			t.Errorf("%s changed its input to %s", name, render(in))
		}
		for i := range out {
			for j := range out[i].Addresses {
				out[i].Addresses[j].IP = "changed"
			}
			for j := range out[i].Ports {
				out[i].Ports[j].Port = 9
			}
		}
		if !reflect.DeepEqual(in, was) {
			t.Errorf("%s returned lists of its input", name)
		}
	}
}

// TestRepackIsCanonical: the order of the input does not show, and a
// repacked list repacks to itself.
func TestRepackIsCanonical(t *testing.T) {
	a := []corev1.EndpointSubset{
		sub(list(addr("10.0.0.1", "a")), nil, port("http", 80)),
		sub(list(addr("10.0.0.2", "b")), nil, port("http", 81)),
		sub(nil, list(addr("10.0.0.3", "c")), port("http", 80), port("x", 1)),
		sub(list(addr("10.0.0.4", "d")), nil),
	}
	b := []corev1.EndpointSubset{a[3], a[2], a[1], a[0]}
	if x, y := render(Repack(a)), render(Repack(b)); x != y {
		t.Errorf("%q != %q", x, y)
	}
	once := Repack(a)
	if twice := Repack(once); !reflect.DeepEqual(once, twice) {
		t.Errorf("repacking %q gave %q", render(once), render(twice))
	}
}

// TestRepackOrderMatchesKCM: for a fixed input, the subsets, their ports
// and their addresses come out in the order KCM v1.37.1's repacking gives
// (recorded from it), the order that gets written.
func TestRepackOrderMatchesKCM(t *testing.T) {
	full := func(ip string, uid types.UID, host string) corev1.EndpointAddress {
		a := addr(ip, uid)
		node := "node-1"
		a.Hostname, a.NodeName = host, &node
		return a
	}
	in := []corev1.EndpointSubset{
		sub(list(full("10.0.0.1", "a", "")), nil, port("http", 8080)),
		sub(list(full("10.0.0.1", "a", "")), nil, port("metrics", 9090)),
		sub(list(full("10.0.0.2", "b", "h")), nil, port("http", 8081)),
		sub(list(full("10.0.0.2", "b", "h")), nil, port("metrics", 9090)),
		sub(nil, list(full("10.0.0.3", "c", "")), port("http", 8080)),
		sub(nil, list(full("10.0.0.3", "c", "")), port("metrics", 9090)),
		sub(list(full("10.0.0.4", "d", "")), nil, port("grpc", 7000), port("a", 1), port("z", 2)),
	}
	const want = "10.0.0.4/d||grpc=7000,z=2,a=1;" +
		"10.0.0.1/a,10.0.0.2/b|10.0.0.3/c|metrics=9090;" +
		"10.0.0.1/a|10.0.0.3/c|http=8080;" +
		"10.0.0.2/b||http=8081"
	if got := render(Repack(in)); got != want {
		t.Errorf("repacked\n  %s\nKCM gives\n  %s", got, want)
	}
}

// TestGroupKeepsInputOrder: Group leaves subsets in the order of their
// first port in the input (addresses without ports where first listed),
// and ports in input order.
func TestGroupKeepsInputOrder(t *testing.T) {
	in := []corev1.EndpointSubset{
		sub(list(addr("10.0.0.2", "b")), nil, port("z", 2), port("a", 1)),
		sub(list(addr("10.0.0.3", "c")), nil),
		sub(list(addr("10.0.0.1", "a")), nil, port("m", 3)),
		sub(list(addr("10.0.0.2", "b")), nil, port("b", 4)),
	}
	const want = "10.0.0.2/b||z=2,a=1,b=4;10.0.0.3/c||;10.0.0.1/a||m=3"
	if got := render(Group(in)); got != want {
		t.Errorf("grouped\n  %s\nwant\n  %s", got, want)
	}
}
