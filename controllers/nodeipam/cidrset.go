package nodeipam

import (
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
)

// maxIPv6Split bounds how many node CIDRs an IPv6 cluster CIDR may be cut
// into (2^16), as KCM's cidrset does: the set is a bitmap.
const maxIPv6Split = 16

// errExhausted is AllocateNext's error once every node CIDR is taken.
var errExhausted = errors.New("no node CIDR left to allocate in the cluster CIDR")

// cidrSet hands out the node CIDRs of one cluster CIDR as KCM's range
// allocator does: a bitmap of used blocks and a next candidate that moves
// on past each allocation, so that a released block is handed out again
// only once the candidate has gone round the whole range.
type cidrSet struct {
	cluster *net.IPNet
	base    *big.Int // the cluster CIDR's first address
	bits    int      // 32 or 128
	size    int      // the node CIDR mask size
	max     int      // how many node CIDRs fit
	mu      sync.Mutex
	used    big.Int
	count   int
	next    int
}

func newCIDRSet(cluster *net.IPNet, size int) (*cidrSet, error) {
	if err := checkMaskSize(cluster, size); err != nil {
		return nil, err
	}
	ones, bits := cluster.Mask.Size()
	return &cidrSet{cluster: cluster, base: ipToInt(cluster.IP), bits: bits, size: size,
		max: 1 << (size - ones)}, nil
}

// ipToInt returns ip as an integer, IPv4 addresses on 32 bits.
func ipToInt(ip net.IP) *big.Int {
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return new(big.Int).SetBytes(ip)
}

// block returns the i-th node CIDR.
func (s *cidrSet) block(i int) *net.IPNet {
	n := new(big.Int).Lsh(big.NewInt(int64(i)), uint(s.bits-s.size))
	n.Or(n, s.base)
	ip := make(net.IP, s.bits/8)
	n.FillBytes(ip)
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(s.size, s.bits)}
}

// index returns the node CIDR ip falls in.
func (s *cidrSet) index(ip net.IP) int {
	n := new(big.Int).Xor(ipToInt(ip), s.base)
	return int(n.Rsh(n, uint(s.bits-s.size)).Int64())
}

// span returns the first and last node CIDR c overlaps; an error when it
// overlaps none (c is outside the cluster CIDR, or of the other family).
func (s *cidrSet) span(c *net.IPNet) (int, int, error) {
	if c == nil {
		return 0, 0, fmt.Errorf("no CIDR given for cluster CIDR %s", s.cluster)
	}
	if !s.cluster.Contains(c.IP.Mask(s.cluster.Mask)) && !c.Contains(s.cluster.IP.Mask(c.Mask)) {
		return 0, 0, fmt.Errorf("%s is outside the cluster CIDR %s", c, s.cluster)
	}
	ones, _ := c.Mask.Size()
	if clusterOnes, _ := s.cluster.Mask.Size(); ones <= clusterOnes {
		return 0, s.max - 1, nil // c holds the whole cluster CIDR
	}
	last := ipToInt(c.IP.Mask(c.Mask))
	host := new(big.Int).Lsh(big.NewInt(1), uint(s.bits-ones))
	last.Add(last, host.Sub(host, big.NewInt(1)))
	lastIP := make(net.IP, s.bits/8)
	last.FillBytes(lastIP)
	return s.index(c.IP.Mask(c.Mask)), s.index(lastIP), nil
}

// AllocateNext takes the first free node CIDR from the next candidate on.
func (s *cidrSet) AllocateNext() (*net.IPNet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count == s.max {
		return nil, errExhausted
	}
	i := s.next
	for s.used.Bit(i) != 0 {
		i = (i + 1) % s.max
	}
	s.next = (i + 1) % s.max
	s.used.SetBit(&s.used, i, 1)
	s.count++
	return s.block(i), nil
}

// Occupy marks every node CIDR c overlaps used.
func (s *cidrSet) Occupy(c *net.IPNet) error { return s.mark(c, 1) }

// Release marks every node CIDR c overlaps free.
func (s *cidrSet) Release(c *net.IPNet) error { return s.mark(c, 0) }

func (s *cidrSet) mark(c *net.IPNet, bit uint) error {
	first, last, err := s.span(c)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := first; i <= last; i++ {
		if s.used.Bit(i) == bit {
			continue
		}
		s.used.SetBit(&s.used, i, bit)
		if bit == 1 {
			s.count++
		} else {
			s.count--
		}
	}
	return nil
}
