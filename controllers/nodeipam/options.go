package nodeipam

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"

	"github.com/ctrlhost/ctrlhost/internal/sharedflag"
)

// Name and Alias are the controller's names in --controllers, as in KCM.
const (
	Name  = "node-ipam-controller"
	Alias = "nodeipam"
)

// eventSource is the source component of the controller's events: KCM's
// range allocator records as "cidrAllocator".
const eventSource = "cidrAllocator"

// clientName is KCM's name for the controller's client and ServiceAccount
// (shared with the node lifecycle controller).
const clientName = "node-controller"

// The allocator types KCM knows. Only RangeAllocator is implemented (KCM
// v1.37 itself can run no other without a cloud provider).
const (
	RangeAllocator  = "RangeAllocator"
	CloudAllocator  = "CloudAllocator"
	IPAMFromCluster = "IPAMFromCluster"
	IPAMFromCloud   = "IPAMFromCloud"
)

// The node CIDR mask sizes KCM uses when none is set for a family.
const (
	defaultNodeCIDRMaskSizeIPv4 = 24
	defaultNodeCIDRMaskSizeIPv6 = 64
)

// Options configures the controller, under KCM's flag names and defaults.
// In KCM, AllocateNodeCIDRs, ClusterCIDR and CIDRAllocatorType are flags
// of the shared "generic" group (KubeCloudShared, also read by the cloud
// controllers); the others are the controller's own group.
type Options struct {
	// AllocateNodeCIDRs is --allocate-node-cidrs: with it false (the
	// default) the controller does not start, as in KCM.
	AllocateNodeCIDRs bool
	// ClusterCIDR is --cluster-cidr: the pod CIDR, or two of them
	// (comma-separated, one per IP family). Required when allocating.
	ClusterCIDR string
	// CIDRAllocatorType is --cidr-allocator-type. Default: RangeAllocator,
	// the only one supported.
	CIDRAllocatorType string
	// NodeCIDRMaskSize is --node-cidr-mask-size: the mask of every node
	// CIDR of a single-stack cluster. 0 (the default): unset.
	NodeCIDRMaskSize int32
	// NodeCIDRMaskSizeIPv4 is --node-cidr-mask-size-ipv4. 0 (the default):
	// unset, 24 is used.
	NodeCIDRMaskSizeIPv4 int32
	// NodeCIDRMaskSizeIPv6 is --node-cidr-mask-size-ipv6. 0 (the default):
	// unset, 64 is used.
	NodeCIDRMaskSizeIPv6 int32
	// ServiceClusterIPRange is --service-cluster-ip-range: the Service
	// CIDR, or two (comma-separated; KCM takes the second as the secondary
	// Service CIDR). Node CIDRs overlapping them are never allocated.
	ServiceClusterIPRange string
}

// NewOptions returns KCM's defaults.
func NewOptions() Options { return Options{CIDRAllocatorType: RangeAllocator} }

// AddFlags binds o to fs under KCM's names, with o's current values as the
// defaults shown.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	sharedflag.Bool(fs, &o.AllocateNodeCIDRs, "allocate-node-cidrs",
		"Should CIDRs for Pods be allocated and set on the cloud provider. "+
			"Requires --cluster-cidr.")
	sharedflag.String(fs, &o.ClusterCIDR, "cluster-cidr",
		"CIDR Range for Pods in cluster. Only used when --allocate-node-cidrs=true; "+
			"if false, this option will be ignored.")
	fs.StringVar(&o.CIDRAllocatorType, "cidr-allocator-type", o.CIDRAllocatorType,
		"Type of CIDR allocator to use")
	fs.StringVar(&o.ServiceClusterIPRange, "service-cluster-ip-range", o.ServiceClusterIPRange,
		"CIDR Range for Services in cluster. Only used when --allocate-node-cidrs=true; "+
			"if false, this option will be ignored.")
	fs.Int32Var(&o.NodeCIDRMaskSize, "node-cidr-mask-size", o.NodeCIDRMaskSize,
		"Mask size for node cidr in cluster. Default is 24 for IPv4 and 64 for IPv6.")
	fs.Int32Var(&o.NodeCIDRMaskSizeIPv4, "node-cidr-mask-size-ipv4", o.NodeCIDRMaskSizeIPv4,
		"Mask size for IPv4 node cidr in dual-stack cluster. Default is 24.")
	fs.Int32Var(&o.NodeCIDRMaskSizeIPv6, "node-cidr-mask-size-ipv6", o.NodeCIDRMaskSizeIPv6,
		"Mask size for IPv6 node cidr in dual-stack cluster. Default is 64.")
}

// settings is what the allocator runs with, parsed from Options.
type settings struct {
	clusterCIDRs []*net.IPNet
	maskSizes    []int // by clusterCIDRs' index
	serviceCIDRs []*net.IPNet
}

// Validate reports every invalid setting, naming its flag. As in KCM, only
// the number of --service-cluster-ip-range entries is checked when
// --allocate-node-cidrs is false: the rest is then ignored.
func (o Options) Validate() error {
	var errs []error
	if n := len(strings.Split(o.ServiceClusterIPRange, ",")); n > 2 {
		errs = append(errs, fmt.Errorf("--service-cluster-ip-range %q: at most two entries "+
			"(one per IP family), got %d", o.ServiceClusterIPRange, n))
	}
	if o.AllocateNodeCIDRs {
		if _, err := o.settings(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// settings parses o as KCM's startNodeIpamController does, reporting every
// invalid setting at once.
func (o Options) settings() (settings, error) {
	var s settings
	var errs []error
	switch o.CIDRAllocatorType {
	case RangeAllocator:
	case CloudAllocator, IPAMFromCluster, IPAMFromCloud:
		errs = append(errs, fmt.Errorf("--cidr-allocator-type %q: needs a cloud provider, "+
			"which this host does not run; use %s", o.CIDRAllocatorType, RangeAllocator))
	default:
		errs = append(errs, fmt.Errorf("--cidr-allocator-type %q: unknown; the only one "+
			"supported is %s", o.CIDRAllocatorType, RangeAllocator))
	}
	cidrs, err := clusterCIDRs(o.ClusterCIDR)
	if err != nil {
		errs = append(errs, err)
	} else {
		s.clusterCIDRs = cidrs
		if s.maskSizes, err = o.maskSizes(cidrs); err != nil {
			errs = append(errs, err)
		}
	}
	if s.serviceCIDRs, err = serviceCIDRs(o.ServiceClusterIPRange); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return settings{}, err
	}
	return s, nil
}

// clusterCIDRs parses --cluster-cidr: one CIDR, or two of different
// families.
func clusterCIDRs(value string) ([]*net.IPNet, error) {
	if strings.TrimSpace(value) == "" {
		return nil, errors.New("--cluster-cidr: required with --allocate-node-cidrs=true " +
			"(the pod CIDR, or an IPv4 and an IPv6 one, comma-separated)")
	}
	cidrs, err := netutils.ParseCIDRs(strings.Split(strings.TrimSpace(value), ","))
	if err != nil {
		return nil, fmt.Errorf("--cluster-cidr %q: %w", value, err)
	}
	dual, _ := netutils.IsDualStackCIDRs(cidrs)
	switch {
	case len(cidrs) > 2:
		return nil, fmt.Errorf("--cluster-cidr %q: at most two CIDRs (one per IP family), "+
			"got %d", value, len(cidrs))
	case len(cidrs) == 2 && !dual:
		return nil, fmt.Errorf("--cluster-cidr %q: two CIDRs must be of different IP "+
			"families (one IPv4, one IPv6)", value)
	}
	return cidrs, nil
}

// maskSizes returns the node CIDR mask size of each cluster CIDR, as KCM
// decides it from the three mask flags, and checks it against the cluster
// CIDR.
func (o Options) maskSizes(cidrs []*net.IPNet) ([]int, error) {
	v4, v6 := defaultNodeCIDRMaskSizeIPv4, defaultNodeCIDRMaskSizeIPv6
	switch {
	case len(cidrs) > 1 && o.NodeCIDRMaskSize != 0:
		return nil, errors.New("--node-cidr-mask-size: not allowed with a dual-stack " +
			"--cluster-cidr; use --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6")
	case len(cidrs) > 1:
		if o.NodeCIDRMaskSizeIPv4 != 0 {
			v4 = int(o.NodeCIDRMaskSizeIPv4)
		}
		if o.NodeCIDRMaskSizeIPv6 != 0 {
			v6 = int(o.NodeCIDRMaskSizeIPv6)
		}
	case o.NodeCIDRMaskSize != 0:
		if o.NodeCIDRMaskSizeIPv4 != 0 || o.NodeCIDRMaskSizeIPv6 != 0 {
			return nil, errors.New("--node-cidr-mask-size-ipv4, --node-cidr-mask-size-ipv6: " +
				"not allowed with --node-cidr-mask-size; set only one of them " +
				"(for a dual-stack cluster, the per-family ones)")
		}
		v4, v6 = int(o.NodeCIDRMaskSize), int(o.NodeCIDRMaskSize)
	case netutils.IsIPv6CIDR(cidrs[0]):
		if o.NodeCIDRMaskSizeIPv4 != 0 {
			return nil, errors.New("--node-cidr-mask-size-ipv4: not allowed with a " +
				"single-stack IPv6 --cluster-cidr; use --node-cidr-mask-size-ipv6")
		}
		if o.NodeCIDRMaskSizeIPv6 != 0 {
			v6 = int(o.NodeCIDRMaskSizeIPv6)
		}
	default:
		if o.NodeCIDRMaskSizeIPv6 != 0 {
			return nil, errors.New("--node-cidr-mask-size-ipv6: not allowed with a " +
				"single-stack IPv4 --cluster-cidr; use --node-cidr-mask-size-ipv4")
		}
		if o.NodeCIDRMaskSizeIPv4 != 0 {
			v4 = int(o.NodeCIDRMaskSizeIPv4)
		}
	}
	sizes := make([]int, len(cidrs))
	var errs []error
	for i, c := range cidrs {
		flag := "--node-cidr-mask-size-ipv4"
		sizes[i] = v4
		if netutils.IsIPv6CIDR(c) {
			sizes[i], flag = v6, "--node-cidr-mask-size-ipv6"
		}
		if o.NodeCIDRMaskSize != 0 {
			flag = "--node-cidr-mask-size"
		}
		if err := checkMaskSize(c, sizes[i]); err != nil {
			errs = append(errs, fmt.Errorf("%s %d: %w", flag, sizes[i], err))
		}
	}
	return sizes, errors.Join(errs...)
}

// checkMaskSize checks that cluster can be cut into node CIDRs of size.
func checkMaskSize(cluster *net.IPNet, size int) error {
	ones, bits := cluster.Mask.Size()
	switch {
	case size < ones:
		return fmt.Errorf("smaller than the mask of --cluster-cidr %s; it must be between "+
			"%d and %d", cluster, ones, bits)
	case size > bits:
		return fmt.Errorf("larger than an address of --cluster-cidr %s has bits; it must be "+
			"between %d and %d", cluster, ones, bits)
	case bits == 128 && size-ones > maxIPv6Split:
		return fmt.Errorf("cuts --cluster-cidr %s into more than 2^%d node CIDRs; it must be "+
			"at most %d", cluster, maxIPv6Split, ones+maxIPv6Split)
	}
	return nil
}

// serviceCIDRs parses --service-cluster-ip-range: up to two CIDRs, of
// different families when two.
func serviceCIDRs(value string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	var errs []error
	entries := strings.Split(value, ",")
	for _, e := range entries[:min(len(entries), 2)] {
		if strings.TrimSpace(e) == "" {
			continue
		}
		_, c, err := netutils.ParseCIDRSloppy(strings.TrimSpace(e))
		if err != nil {
			errs = append(errs, fmt.Errorf("--service-cluster-ip-range %q: %w", value, err))
			continue
		}
		out = append(out, c)
	}
	if len(out) == 2 {
		if dual, _ := netutils.IsDualStackCIDRs(out); !dual {
			errs = append(errs, fmt.Errorf("--service-cluster-ip-range %q: two CIDRs must "+
				"be of different IP families (one IPv4, one IPv6)", value))
		}
	}
	return out, errors.Join(errs...)
}

var nodes = corev1.SchemeGroupVersion.WithResource("nodes")
