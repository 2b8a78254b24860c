package nodeipam

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestValidate: every invalid setting is an error naming its flag; with
// --allocate-node-cidrs false only the Service CIDR count is checked, as
// KCM ignores the rest.
func TestValidate(t *testing.T) {
	on := func(f func(*Options)) Options {
		o := NewOptions()
		o.AllocateNodeCIDRs = true
		o.ClusterCIDR = "10.0.0.0/16"
		if f != nil {
			f(&o)
		}
		return o
	}
	tests := []struct {
		name    string
		o       Options
		wantErr []string // substrings; none: valid
	}{
		{"defaults", NewOptions(), nil},
		{"off ignores a bad cluster CIDR", func() Options {
			o := NewOptions()
			o.ClusterCIDR, o.CIDRAllocatorType = "nonsense", "Nope"
			return o
		}(), nil},
		{"off still counts Service CIDRs", func() Options {
			o := NewOptions()
			o.ServiceClusterIPRange = "10.96.0.0/12,fd00::/108,10.1.0.0/16"
			return o
		}(), []string{"--service-cluster-ip-range", "at most two"}},
		{"single stack IPv4", on(nil), nil},
		{"dual stack with per-family masks", on(func(o *Options) {
			o.ClusterCIDR = "10.0.0.0/16,fd00::/56"
			o.NodeCIDRMaskSizeIPv4, o.NodeCIDRMaskSizeIPv6 = 25, 64
			o.ServiceClusterIPRange = "10.96.0.0/12,fd01::/108"
		}), nil},
		{"no cluster CIDR", on(func(o *Options) { o.ClusterCIDR = "" }),
			[]string{"--cluster-cidr: required"}},
		{"bad cluster CIDR", on(func(o *Options) { o.ClusterCIDR = "10.0.0.0/33" }),
			[]string{`--cluster-cidr "10.0.0.0/33"`}},
		{"two IPv4 cluster CIDRs", on(func(o *Options) {
			o.ClusterCIDR = "10.0.0.0/16,10.1.0.0/16"
		}),
			[]string{"--cluster-cidr", "different IP families"}},
		{"three cluster CIDRs", on(func(o *Options) {
			o.ClusterCIDR = "10.0.0.0/16,fd00::/56,10.1.0.0/16"
		}), []string{"--cluster-cidr", "at most two"}},
		{"cloud allocator", on(func(o *Options) { o.CIDRAllocatorType = CloudAllocator }),
			[]string{`--cidr-allocator-type "CloudAllocator"`, "cloud provider"}},
		{"unknown allocator", on(func(o *Options) { o.CIDRAllocatorType = "Ranged" }),
			[]string{`--cidr-allocator-type "Ranged"`, "RangeAllocator"}},
		{"mask size with dual stack", on(func(o *Options) {
			o.ClusterCIDR, o.NodeCIDRMaskSize = "10.0.0.0/16,fd00::/56", 24
		}), []string{"--node-cidr-mask-size: not allowed with a dual-stack"}},
		{"mask size beside a per-family one", on(func(o *Options) {
			o.NodeCIDRMaskSize, o.NodeCIDRMaskSizeIPv4 = 24, 24
		}), []string{"not allowed with --node-cidr-mask-size"}},
		{"IPv6 mask on an IPv4 cluster", on(func(o *Options) { o.NodeCIDRMaskSizeIPv6 = 64 }),
			[]string{"--node-cidr-mask-size-ipv6: not allowed with a single-stack IPv4"}},
		{"IPv4 mask on an IPv6 cluster", on(func(o *Options) {
			o.ClusterCIDR, o.NodeCIDRMaskSizeIPv4 = "fd00::/56", 24
		}), []string{"--node-cidr-mask-size-ipv4: not allowed with a single-stack IPv6"}},
		{"node mask below the cluster mask", on(func(o *Options) { o.NodeCIDRMaskSize = 8 }),
			[]string{"--node-cidr-mask-size 8", "smaller than the mask"}},
		{"node mask beyond the address", on(func(o *Options) { o.NodeCIDRMaskSizeIPv4 = 33 }),
			[]string{"--node-cidr-mask-size-ipv4 33", "larger than"}},
		{"IPv6 cut too fine", on(func(o *Options) { o.ClusterCIDR = "fd00::/40" }),
			[]string{"--node-cidr-mask-size-ipv6 64", "2^16"}},
		{"bad Service CIDR", on(func(o *Options) { o.ServiceClusterIPRange = "10.96.0.0/40" }),
			[]string{`--service-cluster-ip-range "10.96.0.0/40"`}},
		{"two IPv4 Service CIDRs", on(func(o *Options) {
			o.ServiceClusterIPRange = "10.96.0.0/12,10.112.0.0/12"
		}), []string{"--service-cluster-ip-range", "different IP families"}},
		{"every error at once", on(func(o *Options) {
			o.ClusterCIDR, o.CIDRAllocatorType, o.ServiceClusterIPRange = "x", "y", "z"
		}), []string{"--cluster-cidr", "--cidr-allocator-type", "--service-cluster-ip-range"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate succeeded; want an error with %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestMaskSizes: the mask chosen for each cluster CIDR, as KCM's
// setNodeCIDRMaskSizes chooses it.
func TestMaskSizes(t *testing.T) {
	tests := []struct {
		cluster          string
		size, ipv4, ipv6 int32
		want             []int
	}{
		{"10.0.0.0/16", 0, 0, 0, []int{24}},
		{"10.0.0.0/16", 26, 0, 0, []int{26}},
		{"10.0.0.0/16", 0, 20, 0, []int{20}},
		{"fd00::/56", 0, 0, 0, []int{64}},
		{"fd00::/56", 60, 0, 0, []int{60}},
		{"fd00::/56", 0, 0, 62, []int{62}},
		{"10.0.0.0/16,fd00::/56", 0, 0, 0, []int{24, 64}},
		{"fd00::/56,10.0.0.0/16", 0, 25, 66, []int{66, 25}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt), func(t *testing.T) {
			o := Options{AllocateNodeCIDRs: true, ClusterCIDR: tt.cluster,
				CIDRAllocatorType: RangeAllocator, NodeCIDRMaskSize: tt.size,
				NodeCIDRMaskSizeIPv4: tt.ipv4, NodeCIDRMaskSizeIPv6: tt.ipv6}
			s, err := o.settings()
			if err != nil || !slices.Equal(s.maskSizes, tt.want) {
				t.Errorf("mask sizes = %v, %v; want %v", s.maskSizes, err, tt.want)
			}
		})
	}
}
