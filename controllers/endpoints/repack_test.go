package endpoints

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller maintains (as KCM's)

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func addr(ip string, uid types.UID) corev1.EndpointAddress {
	return corev1.EndpointAddress{IP: ip, TargetRef: &corev1.ObjectReference{Kind: "Pod", UID: uid}}
}

func port(name string, n int32) corev1.EndpointPort {
	return corev1.EndpointPort{Name: name, Port: n, Protocol: corev1.ProtocolTCP}
}

func TestRepack(t *testing.T) {
	tests := []struct {
		name string
		in   []corev1.EndpointSubset
		want string
	}{
		{"nothing", nil, ""},
		{"same ports merge, addresses sorted by IP",
			[]corev1.EndpointSubset{
				{Addresses: []corev1.EndpointAddress{addr("10.0.0.2", "b")}, Ports: []corev1.EndpointPort{port("http", 80)}},
				{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "a")}, Ports: []corev1.EndpointPort{port("http", 80)}},
			},
			"10.0.0.1,10.0.0.2||http=80"},
		{"an address on two ports gets one subset with both",
			[]corev1.EndpointSubset{
				{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "a")}, Ports: []corev1.EndpointPort{port("http", 80)}},
				{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "a")}, Ports: []corev1.EndpointPort{port("metrics", 90)}},
			},
			"<one subset, two ports>"},
		{"not ready anywhere on a port: not ready",
			[]corev1.EndpointSubset{
				{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "a")}, Ports: []corev1.EndpointPort{port("http", 80)}},
				{NotReadyAddresses: []corev1.EndpointAddress{addr("10.0.0.1", "a")}, Ports: []corev1.EndpointPort{port("http", 80)}},
			},
			"|10.0.0.1|http=80"},
		{"no ports",
			[]corev1.EndpointSubset{
				{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "a")}},
				{NotReadyAddresses: []corev1.EndpointAddress{addr("10.0.0.2", "b")}},
			},
			"10.0.0.1|10.0.0.2|"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := repack(tt.in)
			got := render(out)
			if tt.want == "<one subset, two ports>" {
				if len(out) != 1 || len(out[0].Ports) != 2 || len(out[0].Addresses) != 1 {
					t.Errorf("repacked %q", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("repacked %q, want %q", got, tt.want)
			}
			if out == nil {
				t.Error("nil, want an empty list (KCM writes [])")
			}
		})
	}
}

// TestRepackIsCanonical: the order of the input does not matter.
func TestRepackIsCanonical(t *testing.T) {
	a := []corev1.EndpointSubset{
		{Addresses: []corev1.EndpointAddress{addr("10.0.0.1", "a")}, Ports: []corev1.EndpointPort{port("http", 80)}},
		{Addresses: []corev1.EndpointAddress{addr("10.0.0.2", "b")}, Ports: []corev1.EndpointPort{port("http", 81)}},
		{NotReadyAddresses: []corev1.EndpointAddress{addr("10.0.0.3", "c")}, Ports: []corev1.EndpointPort{port("http", 80), port("x", 1)}},
	}
	b := []corev1.EndpointSubset{a[2], a[1], a[0]}
	if x, y := render(repack(a)), render(repack(b)); x != y {
		t.Errorf("%q != %q", x, y)
	}
	if !subsetsEqual(repack(a), repack(repack(a))) {
		t.Error("repacking a packed list changed it")
	}
}

// TestRepackOrderMatchesKCM: for a fixed input, the subsets, their ports
// and their addresses come out in the order KCM v1.37.1's RepackSubsets
// gives (recorded from it), since that order is what gets written.
func TestRepackOrderMatchesKCM(t *testing.T) {
	full := func(ip string, uid types.UID, host string) corev1.EndpointAddress {
		node := "node-1"
		return corev1.EndpointAddress{IP: ip, Hostname: host, NodeName: &node,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: string(uid), UID: uid}}
	}
	in := []corev1.EndpointSubset{
		{Addresses: []corev1.EndpointAddress{full("10.0.0.1", "a", "")}, Ports: []corev1.EndpointPort{port("http", 8080)}},
		{Addresses: []corev1.EndpointAddress{full("10.0.0.1", "a", "")}, Ports: []corev1.EndpointPort{port("metrics", 9090)}},
		{Addresses: []corev1.EndpointAddress{full("10.0.0.2", "b", "h")}, Ports: []corev1.EndpointPort{port("http", 8081)}},
		{Addresses: []corev1.EndpointAddress{full("10.0.0.2", "b", "h")}, Ports: []corev1.EndpointPort{port("metrics", 9090)}},
		{NotReadyAddresses: []corev1.EndpointAddress{full("10.0.0.3", "c", "")}, Ports: []corev1.EndpointPort{port("http", 8080)}},
		{NotReadyAddresses: []corev1.EndpointAddress{full("10.0.0.3", "c", "")}, Ports: []corev1.EndpointPort{port("metrics", 9090)}},
		{Addresses: []corev1.EndpointAddress{full("10.0.0.4", "d", "")}, Ports: []corev1.EndpointPort{port("grpc", 7000), port("a", 1), port("z", 2)}},
	}
	const want = "10.0.0.4||grpc=7000,z=2,a=1;10.0.0.1,10.0.0.2|10.0.0.3|metrics=9090;10.0.0.1|10.0.0.3|http=8080;10.0.0.2||http=8081"
	if got := render(repack(in)); got != want {
		t.Errorf("repacked\n  %s\nKCM gives\n  %s", got, want)
	}
}
