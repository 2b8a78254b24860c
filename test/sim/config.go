package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/ctrlhost/ctrlhost/leader"
)

// Config is what a seed picks.
type Config struct {
	Seed     uint64
	Replicas int
	// Lease durations, nominal (each replica's clock scales them).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Scale is each replica slot's clock: real seconds per second of it.
	Scale           []float64
	Policy          leader.LostLeasePolicy
	Migration       bool
	Sharding        bool
	Slots           int
	Warm            bool
	Credentials     bool
	StartInterval   time.Duration
	ShutdownTimeout time.Duration
	Controllers     []ControllerSpec
	Faults          []Fault
	Duration        time.Duration
	// Gadgets is the schedule of the custom resource that WhenServed
	// controllers (ControllerSpec.Served) wait for: served from the start
	// or not, then installed and removed at these moments, in turn.
	GadgetsAtStart bool
	GadgetFlips    []time.Duration
	// Toggles change every replica's selection (Manager.SetControllers,
	// and the --controllers of replicas started later).
	Toggles []Toggle
	// Keys: the controllers of the main lock (neither sharded nor migrated)
	// send each other keys through the term's queues (descriptor.Queues).
	Keys bool
	// Initial are the controllers off from the start (the --controllers of
	// the first replicas), until the first toggle.
	Initial []string
	// Handoffs are the moments the replica that holds the main lease then
	// is sent SIGTERM (a rolling update).
	Handoffs []time.Duration
}

// Toggle is a change of selection: from At on, every controller runs but
// those in Off. Refused names controllers whose change SetControllers
// must refuse (sharded ones, those leader migration leaves to another
// component): the whole change is refused, then made without them.
type Toggle struct {
	At      time.Duration
	Off     []string
	Refused []string
}

// StopKind is how a controller's Run stops.
type StopKind int

const (
	StopFast  StopKind = iota // returns when its context is done
	StopSlow                  // returns a while after, within the stop budget
	StopNever                 // ignores its context until the run ends
)

// InitKind is how a controller's InitFunc behaves.
type InitKind int

const (
	InitOK        InitKind = iota
	InitBlockCtx           // blocks a while, or until its context is done
	InitBlockHard          // blocks a while, ignoring its context
	InitFlaky              // fails or panics now and then
)

// ControllerSpec is one simulated controller.
type ControllerSpec struct {
	Name     string
	Stop     StopKind
	StopTime time.Duration // StopSlow: how long it takes
	Init     InitKind
	InitTime time.Duration // the blocking kinds: for how long
	Migrated bool
	Sharded  bool
	Served   bool          // WhenServed: runs only while gadgets are served
	Period   time.Duration // between writes
	// Unowned: the migration file leaves it to another component (only
	// with Migration; neither Migrated nor Sharded).
	Unowned bool
	// Reads is what it declares it reads of ConfigMaps (pruned caches).
	Reads ReadKind
	// Index: it adds an index of its own to the shared informer of every
	// ConfigMap at each start, with client-go's AddIndexers.
	Index bool
	// Declines: its InitFunc chooses not to start it (returns nil), after
	// it requested its informers, one start in two.
	Declines bool
	// Lazy: it builds its client anew before each write (ClientBuilder in
	// Run), so that, with Credentials, each client mints a token on its
	// first request, a read.
	Lazy bool
}

// ReadKind is what a controller declares it reads of ConfigMaps.
type ReadKind int

const (
	ReadsWhole      ReadKind = iota // declares the informer, not its fields: whole objects
	ReadsData                       // declares data (binaryData dropped)
	ReadsMetadata                   // declares metadata only
	ReadsUndeclared                 // declares neither informers nor reads
)

func (k ReadKind) String() string {
	return [...]string{"whole", "data", "metadata", "undeclared"}[k]
}

// cooperative reports whether the controller always stops within its
// term's bound.
func (c ControllerSpec) cooperative() bool {
	return c.Stop != StopNever && c.Init != InitBlockHard
}

// FaultKind is a fault the schedule injects.
type FaultKind int

const (
	PartitionHang FaultKind = iota // the replica's requests hang
	PartitionFail                  // the replica's requests fail at once
	SlowLeases                     // the replica's Lease writes take a while
	Terminate                      // SIGTERM: Run's context is cancelled
	Crash                          // the replica vanishes
	APIRestart                     // every watch drops
)

func (k FaultKind) String() string {
	return [...]string{"partition-hang", "partition-fail", "slow-leases", "terminate", "crash",
		"api-restart"}[k]
}

// Fault is one scheduled fault.
type Fault struct {
	At      time.Duration
	Replica int
	Kind    FaultKind
	For     time.Duration // partitions and slow Leases: how long
	Delay   time.Duration // SlowLeases: per write
}

// StopBudget is the nominal stop budget of the lease settings.
func (c Config) StopBudget() time.Duration {
	return leader.Config{LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline,
		RetryPeriod: c.RetryPeriod}.StopBudget()
}

// NewConfig draws a configuration from seed.
func NewConfig(seed uint64) Config {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	c := Config{Seed: seed, Replicas: 2 + rng.IntN(3), Duration: 40 * time.Second}
	c.drawLease(rng)
	for range c.Replicas {
		c.Scale = append(c.Scale, 0.99+0.02*rng.Float64())
	}
	c.Policy = leader.Exit
	if rng.IntN(2) == 0 {
		c.Policy = leader.Recampaign
	}
	c.Migration = rng.IntN(3) == 0
	c.Sharding = rng.IntN(3) == 0
	if c.Sharding {
		c.Slots = 1 + rng.IntN(32)
	}
	c.Warm = rng.IntN(3) == 0
	c.Credentials = rng.IntN(3) == 0
	if rng.IntN(2) == 0 {
		c.StartInterval = time.Duration(rng.IntN(500)) * time.Millisecond
	}
	c.ShutdownTimeout = time.Duration(2+rng.IntN(9)) * time.Second
	budget := max(c.StopBudget(), 10*time.Millisecond)
	n := 2 + rng.IntN(3)
	for i := range n {
		s := ControllerSpec{Name: fmt.Sprintf("sim-%d-controller", i),
			Period: time.Duration(200+rng.IntN(800)) * time.Millisecond}
		switch r := rng.IntN(10); {
		case r < 6:
			s.Stop = StopFast
		case r < 9:
			s.Stop, s.StopTime = StopSlow, time.Duration(float64(budget)*(0.1+0.3*rng.Float64()))
		default:
			s.Stop = StopNever
		}
		switch r := rng.IntN(12); {
		case r < 8:
			s.Init = InitOK
		case r < 10:
			s.Init, s.InitTime = InitBlockCtx, time.Duration(rng.IntN(3000))*time.Millisecond
		case r < 11:
			s.Init, s.InitTime = InitBlockHard, time.Duration(rng.IntN(3000))*time.Millisecond
		default:
			s.Init = InitFlaky
		}
		s.Migrated = c.Migration && rng.IntN(2) == 0
		s.Sharded = c.Sharding && !s.Migrated && rng.IntN(2) == 0
		c.Controllers = append(c.Controllers, s)
	}
	c.drawFaults(rng)
	// Drawn from a stream of their own, so that what a seed drew before
	// WhenServed existed stays as it was.
	rng2 := rand.New(rand.NewPCG(seed, 0x9ad9e7))
	c.drawGadgets(rng2)
	c.drawToggles(rng2)
	c.drawRuntime(rand.New(rand.NewPCG(seed, 0x7e57ab)))
	return c
}

// drawRuntime, from a stream of its own, picks what controllers that come
// and go meet: in one seed out of two, pruned caches (what each declares
// it reads of ConfigMaps, so that informers of several variants run),
// indexes added at each start, InitFuncs that decline now and then, keys
// sent between the main lock's controllers; with migration, controllers
// left to another component; and toggles that name controllers
// SetControllers must refuse (sharded, left to another component).
func (c *Config) drawRuntime(rng *rand.Rand) {
	if rng.IntN(2) != 0 {
		return
	}
	for i := range c.Controllers {
		s := &c.Controllers[i]
		switch r := rng.IntN(20); {
		case r < 6:
			s.Reads = ReadsUndeclared
		case r < 12:
			s.Reads = ReadsData
		case r < 17:
			s.Reads = ReadsMetadata
		default:
			s.Reads = ReadsWhole
		}
		s.Index = rng.IntN(3) == 0
		s.Declines = s.Init == InitOK && rng.IntN(5) == 0
		s.Unowned = c.Migration && !s.Migrated && !s.Sharded && rng.IntN(3) == 0
		s.Lazy = c.Credentials && rng.IntN(2) == 0
	}
	c.Keys = rng.IntN(4) != 0
	if len(c.Toggles) == 0 {
		c.drawComings(rng)
	}
	// Rolling updates: the leader of the moment is sent SIGTERM, and hands
	// over to a follower (a warm one under warm standby).
	for range 1 + rng.IntN(2) {
		c.Handoffs = append(c.Handoffs, time.Duration(5000+rng.IntN(30000))*time.Millisecond)
	}
	slices.Sort(c.Handoffs)
	for i := range c.Toggles {
		t := &c.Toggles[i]
		t.Off = slices.DeleteFunc(t.Off, func(name string) bool {
			return c.spec(name).Unowned // they never run: toggling them is refused
		})
		if rng.IntN(3) != 0 {
			continue
		}
		for _, s := range c.Controllers {
			if (s.Sharded || s.Unowned) && rng.IntN(2) == 0 {
				t.Refused = append(t.Refused, s.Name)
			}
		}
	}
}

// drawComings makes controllers come and go often, 1 to 5 s apart, in
// the shapes that leave informers of several variants behind: the run
// starts with some controllers off (Initial), so that the term's first
// informers keep only what the others read and those that come later may
// need informers of their own; then, in turn, only one controller runs, and
// every controller runs again (those that come back must share the
// running informers that serve them).
func (c *Config) drawComings(rng *rand.Rand) {
	var toggled []string
	for _, s := range c.Controllers {
		if !s.Sharded && !s.Migrated && !s.Unowned {
			toggled = append(toggled, s.Name)
		}
	}
	if len(toggled) < 2 {
		return
	}
	for _, name := range toggled {
		if rng.IntN(2) == 0 {
			c.Initial = append(c.Initial, name)
		}
	}
	for at, only := time.Duration(0), true; ; only = !only {
		at += time.Duration(1000+rng.IntN(4000)) * time.Millisecond
		if at >= c.Duration-5*time.Second {
			return
		}
		t := Toggle{At: at}
		if only {
			keep := toggled[rng.IntN(len(toggled))]
			t.Off = slices.DeleteFunc(slices.Clone(toggled), func(n string) bool { return n == keep })
		}
		c.Toggles = append(c.Toggles, t)
	}
}

// spec is the controller of that name.
func (c Config) spec(name string) ControllerSpec {
	for _, s := range c.Controllers {
		if s.Name == name {
			return s
		}
	}
	return ControllerSpec{}
}

// drawToggles, in one seed out of three, changes the selection at random
// moments 2 to 10 s apart: each time every controller that may be toggled
// (neither sharded nor migrated) is off with probability one half.
func (c *Config) drawToggles(rng *rand.Rand) {
	if rng.IntN(3) != 0 {
		return
	}
	for at := time.Duration(0); ; {
		at += time.Duration(2000+rng.IntN(8000)) * time.Millisecond
		if at >= c.Duration-5*time.Second {
			return
		}
		t := Toggle{At: at}
		for _, s := range c.Controllers {
			if !s.Sharded && !s.Migrated && rng.IntN(2) == 0 {
				t.Off = append(t.Off, s.Name)
			}
		}
		c.Toggles = append(c.Toggles, t)
	}
}

// Selection is the --controllers list a toggle stands for.
func (t Toggle) Selection() []string {
	out := []string{"*"}
	for _, name := range t.Off {
		out = append(out, "-"+name)
	}
	return out
}

// Asked is the list SetControllers is first given: Selection, with the
// refused controllers turned off too.
func (t Toggle) Asked() []string {
	out := t.Selection()
	for _, name := range t.Refused {
		out = append(out, "-"+name)
	}
	return out
}

// drawGadgets makes some controllers WhenServed, in one seed out of three,
// and schedules the gadgets resource to come and go.
func (c *Config) drawGadgets(rng *rand.Rand) {
	if rng.IntN(3) != 0 {
		return
	}
	for i := range c.Controllers {
		c.Controllers[i].Served = rng.IntN(2) == 0
	}
	c.GadgetsAtStart = rng.IntN(2) == 0
	for at := time.Duration(0); ; {
		at += time.Duration(1000+rng.IntN(9000)) * time.Millisecond
		if at >= c.Duration-5*time.Second {
			return
		}
		c.GadgetFlips = append(c.GadgetFlips, at)
	}
}

// drawLease picks lease settings near the edge of the stop budget rule;
// about one seed in ten is past it (Build must reject those).
func (c *Config) drawLease(rng *rand.Rand) {
	lds := []time.Duration{2 * time.Second, 3 * time.Second, 5 * time.Second, 15 * time.Second}
	c.LeaseDuration = lds[rng.IntN(len(lds))]
	c.RetryPeriod = time.Duration(float64(c.LeaseDuration) * (0.05 + 0.15*rng.Float64()))
	// RenewDeadline leaves a budget of a fraction of the lease: small (near
	// the edge), typical, or (rarely) none at all.
	var frac float64
	switch r := rng.IntN(10); {
	case r == 0:
		frac = -0.5 + 0.51*rng.Float64() // past the edge: no budget left, by up to half the lease
	case r < 5:
		frac = 0.03 + 0.05*rng.Float64()
	default:
		frac = 0.08 + 0.2*rng.Float64()
	}
	ld := c.LeaseDuration
	// RenewDeadline + RetryPeriod = what is left of the lease after the
	// budget, the second of renewTime granularity and the drift allowance;
	// client-go's own rule wants RenewDeadline > 1.2 RetryPeriod.
	room := ld - ld/50 - time.Second - time.Duration(frac*float64(ld))
	c.RetryPeriod = min(c.RetryPeriod, room*10/23)
	c.RenewDeadline = room - c.RetryPeriod
	c.RenewDeadline = c.RenewDeadline.Round(time.Millisecond)
	c.RetryPeriod = c.RetryPeriod.Round(time.Millisecond)
}

func (c *Config) drawFaults(rng *rand.Rand) {
	n := rng.IntN(8)
	for range n {
		f := Fault{
			At:      time.Duration(3000+rng.IntN(int(c.Duration/time.Millisecond)-8000)) * time.Millisecond,
			Replica: rng.IntN(c.Replicas),
			Kind:    FaultKind(rng.IntN(6)),
		}
		switch f.Kind {
		case PartitionHang, PartitionFail:
			f.For = time.Duration(rng.Int64N(int64(3 * c.LeaseDuration)))
		case SlowLeases:
			f.For = time.Duration(rng.Int64N(int64(3 * c.LeaseDuration)))
			f.Delay = time.Duration(rng.Int64N(int64(max(c.StopBudget()/3, time.Millisecond))))
		}
		c.Faults = append(c.Faults, f)
	}
}

// String describes the configuration on a few lines.
func (c Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d replicas, lease %v/%v/%v (budget %v), scales %.4f, policy %s",
		c.Seed, c.Replicas, c.LeaseDuration, c.RenewDeadline, c.RetryPeriod, c.StopBudget(), c.Scale,
		c.Policy)
	fmt.Fprintf(&b, "\n  migration %v, sharding %v (%d slots), warm %v, credentials %v, "+
		"start interval %v, shutdown %v",
		c.Migration, c.Sharding, c.Slots, c.Warm, c.Credentials, c.StartInterval, c.ShutdownTimeout)
	for _, s := range c.Controllers {
		fmt.Fprintf(&b, "\n  %s: stop %d (%v), init %d (%v), migrated %v, sharded %v, served %v, "+
			"period %v, unowned %v, reads %v, index %v, declines %v, lazy %v", s.Name, s.Stop,
			s.StopTime, s.Init, s.InitTime, s.Migrated, s.Sharded, s.Served, s.Period, s.Unowned,
			s.Reads, s.Index, s.Declines, s.Lazy)
	}
	if c.Keys {
		b.WriteString("\n  keys sent between the main lock's controllers")
	}
	if len(c.Handoffs) > 0 {
		fmt.Fprintf(&b, "\n  the leader is sent SIGTERM at %v", c.Handoffs)
	}
	if len(c.Initial) > 0 {
		fmt.Fprintf(&b, "\n  at start: controllers %v", Toggle{Off: c.Initial}.Selection())
	}
	for _, t := range c.Toggles {
		fmt.Fprintf(&b, "\n  at %v: controllers %v (refused first: %v)", t.At, t.Selection(), t.Refused)
	}
	if len(c.GadgetFlips) > 0 || c.GadgetsAtStart {
		fmt.Fprintf(&b, "\n  gadgets served at start %v, flipped at %v",
			c.GadgetsAtStart, c.GadgetFlips)
	}
	for _, f := range c.Faults {
		fmt.Fprintf(&b, "\n  at %v: %s replica %d for %v (delay %v)",
			f.At, f.Kind, f.Replica, f.For, f.Delay)
	}
	return b.String()
}
