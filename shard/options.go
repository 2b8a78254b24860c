package shard

import (
	"fmt"

	"github.com/spf13/pflag"
)

// Options configures sharding in a host (manager.Options.Sharding).
type Options struct {
	// Enabled (--enable-sharding) shares the work of sharded controllers
	// (descriptor.Sharded) among every replica: each works the slots its
	// slot Leases give it, beside the main lock's controllers, which run
	// on the leader only. Off, sharded controllers run on the leader like
	// any other, with no Lease but the main one, as in KCM. Sharding needs
	// leader election. Default: false.
	Enabled bool
	// Slots (--shard-slots) is the number of slots the key space is cut
	// into, from 1 to MaxSlots; every replica must use the same (members
	// that disagree work nothing until they agree). More slots balance
	// more replicas more evenly and cost one Lease renewal each per retry
	// period. Default: DefaultSlots.
	Slots int
}

// Scope is the part of a Space one instance of a sharded controller works.
type Scope struct {
	Space Space
	Slots []int
}

// WithDefaults returns a copy with zero fields defaulted.
func (o Options) WithDefaults() Options {
	if o.Slots == 0 {
		o.Slots = DefaultSlots
	}
	return o
}

// Validate reports invalid defaulted options, naming the flag.
func (o Options) Validate() error {
	if o.Slots < 1 || o.Slots > MaxSlots {
		return fmt.Errorf(
			"--shard-slots: %d is out of range; use 1 to %d (default %d)",
			o.Slots,
			MaxSlots,
			DefaultSlots,
		)
	}
	return nil
}

// AddFlags binds the options to fs, with their current values (defaulted)
// as the defaults shown in help.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	*o = o.WithDefaults()
	fs.BoolVar(&o.Enabled, "enable-sharding", o.Enabled, ""+
		"Share the work of shardable controllers among all replicas, each working the slots of the key "+
		"space it holds a Lease for, instead of running them on the leader only. Needs --leader-elect. "+
		"Not a kube-controller-manager flag.")
	fs.IntVar(&o.Slots, "shard-slots", o.Slots, fmt.Sprintf(""+
		"Number of slots the key space of sharded controllers is cut into (1 to %d); every replica "+
		"must use the same. Not a kube-controller-manager flag.", MaxSlots))
}
