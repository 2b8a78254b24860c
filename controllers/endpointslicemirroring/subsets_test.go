package endpointslicemirroring

//lint:file-ignore SA1019 Endpoints are deprecated, and what this controller mirrors (as KCM's)

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// renderSubsets is subsets in short, sorted: "ports|ready|notReady".
func renderSubsets(in []subset) []string {
	var out []string
	for _, s := range in {
		var ports, ready, notReady []string
		for _, p := range s.ports {
			ports = append(ports, fmt.Sprintf("%s=%d", p.Name, p.Port))
		}
		slices.Sort(ports)
		for _, a := range s.ready {
			ready = append(ready, a.IP)
		}
		for _, a := range s.notReady {
			notReady = append(notReady, a.IP)
		}
		out = append(out, strings.Join(ports, ",")+"|"+strings.Join(ready, ",")+"|"+
			strings.Join(notReady, ","))
	}
	slices.Sort(out)
	return out
}

func TestCanonicalSubsets(t *testing.T) {
	other := addr("10.0.0.1")
	other.TargetRef.UID = "another-pod"
	noTarget := corev1.EndpointAddress{IP: "10.0.0.1"}
	tests := []struct {
		name string
		in   []corev1.EndpointSubset
		want []string
	}{
		{"nothing", nil, nil},
		{"same ports merge, addresses in IP order", []corev1.EndpointSubset{
			sub(addrs("10.0.0.2"), nil, port("http", 80)),
			sub(addrs("10.0.0.10", "10.0.0.1"), nil, port("http", 80)),
		}, []string{"http=80|10.0.0.1,10.0.0.10,10.0.0.2|"}},
		{"an address on two ports: one subset with both", []corev1.EndpointSubset{
			sub(addrs("10.0.0.1"), nil, port("http", 80)),
			sub(addrs("10.0.0.1"), nil, port("metrics", 90)),
		}, []string{"http=80,metrics=90|10.0.0.1|"}},
		{"not ready anywhere on a port: not ready on it", []corev1.EndpointSubset{
			sub(addrs("10.0.0.1"), nil, port("http", 80), port("metrics", 90)),
			sub(nil, addrs("10.0.0.1"), port("http", 80)),
		}, []string{"http=80||10.0.0.1", "metrics=90|10.0.0.1|"}},
		{"same IP, another target: two addresses; no target first", []corev1.EndpointSubset{
			sub([]corev1.EndpointAddress{other, addr("10.0.0.1"), noTarget}, nil,
				port("http", 80)),
		}, []string{"http=80|10.0.0.1,10.0.0.1,10.0.0.1|"}},
		{"no ports", []corev1.EndpointSubset{
			sub(addrs("10.0.0.1"), nil),
			sub(nil, addrs("10.0.0.2")),
		}, []string{"|10.0.0.1|10.0.0.2"}},
		{"addresses without ports join the subset of a port carrying exactly them",
			[]corev1.EndpointSubset{
				sub(addrs("10.0.0.1"), nil),
				sub(addrs("10.0.0.1"), nil, port("http", 80)),
			}, []string{"http=80|10.0.0.1|"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := canonicalSubsets(tt.in)
			if r := renderSubsets(got); !slices.Equal(r, tt.want) {
				t.Errorf("subsets %q, want %q", r, tt.want)
			}
		})
	}
}

func TestCanonicalSubsetsOrderOfTargets(t *testing.T) {
	a, b := addr("10.0.0.1"), addr("10.0.0.1")
	a.TargetRef.UID, b.TargetRef.UID = "b", "a"
	noTarget := corev1.EndpointAddress{IP: "10.0.0.1", Hostname: "none"}
	got := canonicalSubsets([]corev1.EndpointSubset{
		sub([]corev1.EndpointAddress{a, noTarget, b}, nil, port("http", 80))})
	if len(got) != 1 || len(got[0].ready) != 3 || got[0].ready[0].Hostname != "none" ||
		got[0].ready[1].TargetRef.UID != "a" || got[0].ready[2].TargetRef.UID != "b" {
		t.Errorf("ready %+v, want no target, then UIDs a, b", got)
	}
	// The first occurrence of an address is kept.
	first := addr("10.0.0.5")
	first.Hostname = "first"
	second := addr("10.0.0.5")
	second.Hostname = "second"
	got = canonicalSubsets([]corev1.EndpointSubset{
		sub([]corev1.EndpointAddress{first}, nil, port("http", 80)),
		sub([]corev1.EndpointAddress{second}, nil, port("http", 80))})
	if len(got) != 1 || len(got[0].ready) != 1 || got[0].ready[0].Hostname != "first" {
		t.Errorf("subsets %+v, want the first occurrence", got)
	}
}
