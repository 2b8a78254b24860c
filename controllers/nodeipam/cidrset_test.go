package nodeipam

import (
	"errors"
	"net"
	"testing"

	netutils "k8s.io/utils/net"
)

func mustCIDR(t *testing.T, s string) *net.IPNet {
	t.Helper()
	_, c, err := netutils.ParseCIDRSloppy(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCIDRSet: blocks come from the next candidate on, a released block
// is handed out again only after the candidate went round, occupied ranges
// (a Service CIDR) are skipped, and an exhausted set says so.
func TestCIDRSet(t *testing.T) {
	type op struct {
		do   string // "next", "occupy", "release"
		cidr string // occupy/release: the CIDR; next: the block expected ("" exhausted)
	}
	tests := []struct {
		name    string
		cluster string
		size    int
		ops     []op
	}{
		{"IPv4 in order, released block reused after wrapping", "10.0.0.0/22", 24, []op{
			{"next", "10.0.0.0/24"}, {"next", "10.0.1.0/24"},
			{"release", "10.0.0.0/24"},
			{"next", "10.0.2.0/24"}, {"next", "10.0.3.0/24"},
			{"next", "10.0.0.0/24"}, {"next", ""},
		}},
		{"a Service CIDR smaller than a block takes the whole block", "10.0.0.0/22", 24, []op{
			{"occupy", "10.0.1.16/28"},
			{"next", "10.0.0.0/24"}, {"next", "10.0.2.0/24"}, {"next", "10.0.3.0/24"},
			{"next", ""},
		}},
		{"a range over several blocks", "10.0.0.0/22", 24, []op{
			{"occupy", "10.0.0.0/23"}, {"next", "10.0.2.0/24"}, {"release", "10.0.0.0/23"},
			{"next", "10.0.3.0/24"}, {"next", "10.0.0.0/24"},
		}},
		{"a CIDR holding the whole cluster CIDR", "10.0.0.0/22", 24, []op{
			{"occupy", "10.0.0.0/16"}, {"next", ""}, {"release", "10.0.0.0/8"},
			{"next", "10.0.0.0/24"},
		}},
		{"IPv6", "fd00:1::/62", 64, []op{
			{"next", "fd00:1::/64"}, {"occupy", "fd00:1:0:1::/64"}, {"next", "fd00:1:0:2::/64"},
			{"occupy", "fd00:1:0:1::/64"}, // twice: counted once
			{"next", "fd00:1:0:3::/64"}, {"next", ""},
		}},
		{"IPv6 blocks below /64", "fd00::/112", 120, []op{
			{"next", "fd00::/120"}, {"next", "fd00::100/120"},
		}},
		{"one block", "10.1.0.0/24", 24, []op{{"next", "10.1.0.0/24"}, {"next", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := newCIDRSet(mustCIDR(t, tt.cluster), tt.size)
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range tt.ops {
				switch o.do {
				case "next":
					got, err := s.AllocateNext()
					if o.cidr == "" {
						if !errors.Is(err, errExhausted) {
							t.Fatalf("op %d: AllocateNext = %v, %v; want exhausted", i, got, err)
						}
						continue
					}
					if err != nil || got.String() != o.cidr {
						t.Fatalf("op %d: AllocateNext = %v, %v; want %s", i, got, err, o.cidr)
					}
				case "occupy":
					if err := s.Occupy(mustCIDR(t, o.cidr)); err != nil {
						t.Fatalf("op %d: Occupy(%s): %v", i, o.cidr, err)
					}
				case "release":
					if err := s.Release(mustCIDR(t, o.cidr)); err != nil {
						t.Fatalf("op %d: Release(%s): %v", i, o.cidr, err)
					}
				}
			}
		})
	}
}

// TestCIDRSetRefusesOutsiders: a CIDR outside the cluster CIDR, or of the
// other family, is an error naming both.
func TestCIDRSetRefusesOutsiders(t *testing.T) {
	s, err := newCIDRSet(mustCIDR(t, "10.0.0.0/22"), 24)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"10.0.4.0/24", "192.168.0.0/16", "fd00::/64"} {
		if err := s.Occupy(mustCIDR(t, c)); err == nil {
			t.Errorf("Occupy(%s) succeeded", c)
		}
		if err := s.Release(mustCIDR(t, c)); err == nil {
			t.Errorf("Release(%s) succeeded", c)
		}
	}
	if err := s.Occupy(nil); err == nil {
		t.Error("Occupy(nil) succeeded")
	}
}
