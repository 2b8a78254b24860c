package leader

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/clock"
)

// ResourceLockLeases is the only lock type: a coordination.k8s.io/v1 Lease.
// client-go removed the endpoints, configmaps, endpointsleases and
// configmapsleases locks that older KCM releases accepted.
const ResourceLockLeases = "leases"

// Defaults applied by Config.WithDefaults; they are KCM's.
const (
	DefaultNamespace     = "kube-system"
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// KCM flag names, used in error messages so that users of a
// KCM-compatible command line see which flag to fix.
const (
	flagResourceLock      = "--leader-elect-resource-lock"
	flagResourceName      = "--leader-elect-resource-name"
	flagResourceNamespace = "--leader-elect-resource-namespace"
	flagLeaseDuration     = "--leader-elect-lease-duration"
	flagRenewDeadline     = "--leader-elect-renew-deadline"
	flagRetryPeriod       = "--leader-elect-retry-period"
)

// Config configures one leader election lock. The zero value plus
// WithDefaults is KCM's configuration.
type Config struct {
	// ResourceLock is the lock type. Default "leases", the only accepted value.
	ResourceLock string
	// Namespace of the Lease. Default "kube-system".
	Namespace string
	// Name of the Lease. Default: the component name given to WithDefaults.
	Name string
	// Identity written into the Lease by this replica. Default:
	// "<hostname>_<random uuid>", as KCM does, so that two processes on one
	// host never share an identity.
	Identity string

	// LeaseDuration is how long followers wait, after they last saw the
	// Lease change, before they may take it over. Default 15s. The Lease
	// stores it in whole seconds, so it must be at least 1s; any fraction of
	// a second is dropped when it is written.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying a failing renewal
	// before it gives the lease up. Default 10s.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between renewals and between acquisition
	// attempts. Default 2s.
	RetryPeriod time.Duration

	// KeepLeaseOnCancel keeps the lease when Run's context is cancelled, so
	// that another replica can only take over once it expired. Default
	// false: the lease is released as soon as the term has returned.
	KeepLeaseOnCancel bool

	// Clock drives this package's own time keeping (watchdog, expiry
	// timers, the write gate, Term.StopBy, timestamps written on release)
	// and, in package manager, a term's stop deadline. Default: the real
	// clock. client-go's LeaderElector cannot be given a clock; it always
	// uses the real one for renewals and acquisition, with the durations
	// above converted to it when Clock is a ScaledClock.
	Clock clock.Clock
}

// ScaledClock is a Clock whose seconds last Scale real seconds: a clock
// running slow (Scale > 1) or fast (Scale < 1), as a simulation of clock
// drift uses. An Elector on one hands client-go, which runs on the real
// clock, its durations multiplied by Scale, so that the whole elector keeps
// one time base.
type ScaledClock interface {
	clock.Clock
	Scale() float64
}

// WithDefaults returns a copy of c with every unset field defaulted;
// component is the default Lease name. It never modifies c.
func (c Config) WithDefaults(component string) Config {
	if c.ResourceLock == "" {
		c.ResourceLock = ResourceLockLeases
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Name == "" {
		c.Name = component
	}
	if c.Identity == "" {
		c.Identity = defaultIdentity()
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = DefaultRenewDeadline
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// defaultIdentity is KCM's identity: host name, underscore, random UUID.
// Without a host name the UUID alone is still unique.
func defaultIdentity() string {
	id := uuid.NewString()
	if host, err := os.Hostname(); err == nil && host != "" {
		return host + "_" + id
	}
	return id
}

// Validate reports every problem in c at once, each naming the field and
// the KCM flag that sets it. It checks what client-go's NewLeaderElector
// checks, plus the lock type, the names, and the whole-second Lease duration.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("leader: "+format, args...))
	}

	if c.ResourceLock != ResourceLockLeases {
		hint := ""
		switch strings.ToLower(c.ResourceLock) {
		case "endpoints", "configmaps", "endpointsleases", "configmapsleases":
			hint = " (client-go removed that lock type; migrate to leases)"
		}
		add(
			"ResourceLock (%s) must be %q, got %q%s",
			flagResourceLock,
			ResourceLockLeases,
			c.ResourceLock,
			hint,
		)
	}
	if c.Namespace == "" {
		add("Namespace (%s) must not be empty", flagResourceNamespace)
	} else if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		add("Namespace (%s) %q is not a valid namespace: %s", flagResourceNamespace, c.Namespace,
			strings.Join(msgs, "; "))
	}
	if c.Name == "" {
		add("Name (%s) must not be empty", flagResourceName)
	} else if msgs := validation.IsDNS1123Subdomain(c.Name); len(msgs) > 0 {
		add("Name (%s) %q is not a valid Lease name: %s", flagResourceName, c.Name,
			strings.Join(msgs, "; "))
	}
	if c.Identity == "" {
		add("Identity (no KCM flag; default <hostname>_<uuid>) must not be empty")
	}

	positive := true
	for _, d := range []struct {
		field, flag string
		v           time.Duration
	}{
		{"LeaseDuration", flagLeaseDuration, c.LeaseDuration},
		{"RenewDeadline", flagRenewDeadline, c.RenewDeadline},
		{"RetryPeriod", flagRetryPeriod, c.RetryPeriod},
	} {
		if d.v <= 0 {
			add("%s (%s) must be greater than zero, got %s", d.field, d.flag, d.v)
			positive = false
		}
	}
	if c.LeaseDuration > 0 && c.LeaseDuration < time.Second {
		add(
			"LeaseDuration (%s) must be at least 1s because the Lease stores whole seconds, got %s",
			flagLeaseDuration,
			c.LeaseDuration,
		)
	}
	if positive {
		stored := c.LeaseDuration.Truncate(time.Second)
		if stored > c.RenewDeadline && c.StopBudget() <= 0 {
			add("LeaseDuration (%s) must exceed RenewDeadline (%s) + RetryPeriod (%s) + 1s "+
				"(other replicas time a renewal from its renewTime's second) + LeaseDuration/50 "+
				"(the allowance for clocks running at different rates), so that a replica that lost the lease "+
				"has stopped its controllers before another can take it: %s <= %s + %s + 1s + %s; "+
				"lengthen the lease or shorten the other two (kube-controller-manager does not check this)",
				flagLeaseDuration, flagRenewDeadline, flagRetryPeriod,
				stored, c.RenewDeadline, c.RetryPeriod, c.driftAllowance())
		}
		if stored <= c.RenewDeadline {
			note := ""
			if stored != c.LeaseDuration {
				note = fmt.Sprintf(" (the Lease stores %s, whole seconds)", stored)
			}
			add("LeaseDuration (%s) must be greater than RenewDeadline (%s): %s <= %s%s",
				flagLeaseDuration, flagRenewDeadline, c.LeaseDuration, c.RenewDeadline, note)
		}
		if minRenew := time.Duration(leaderelection.JitterFactor *
			float64(c.RetryPeriod)); c.RenewDeadline <= minRenew {
			add(
				"RenewDeadline (%s) must be greater than RetryPeriod (%s) × %g "+
					"(client-go's JitterFactor): %s <= %s",
				flagRenewDeadline,
				flagRetryPeriod,
				leaderelection.JitterFactor,
				c.RenewDeadline,
				minRenew,
			)
		}
	}
	return errors.Join(errs...)
}

// StopBudget is how long a term may take to stop after this replica noticed
// that it lost the lease, at the latest, before another replica could have
// taken it over.
//
// client-go renews every RetryPeriod. When a renewal round starts failing it
// keeps retrying for RenewDeadline, so the loss is noticed up to
// RetryPeriod+RenewDeadline after the last successful renewal started.
// Another replica may take over once LeaseDuration (as stored: whole
// seconds) has passed, on its own clock, since it saw that renewal change
// the Lease. client-go compares Lease records in JSON, where renewTime has
// whole seconds: a follower sees the renewals within one second as one, so
// it may time the expiry from the first renewal of the newest second, up to
// a second before the newest renewal. Clocks that run at different rates
// shorten that on this replica's clock: the budget keeps back a fiftieth
// of LeaseDuration (two clocks each up to 1% off), the drift allowance. So
// the budget is LeaseDuration - RenewDeadline - RetryPeriod - 1s -
// LeaseDuration/50. Validate rejects settings where it is not positive. A
// term that lost the lease stops by Term.StopBy, which counts from the
// last renewal itself and so is never later than this budget after the
// loss was noticed.
func (c Config) StopBudget() time.Duration {
	return c.LeaseDuration.Truncate(
		time.Second,
	) - c.RenewDeadline - c.RetryPeriod - renewTimeGranularity -
		c.driftAllowance()
}

// renewTimeGranularity is how coarsely other replicas see renewals: the
// whole seconds of a Lease record's renewTime in client-go's comparison.
const renewTimeGranularity = time.Second

// driftAllowance is what the stop budget keeps back for clocks that run at
// different rates: two clocks each 1% off drift apart by 2% of the lease.
func (c Config) driftAllowance() time.Duration {
	return c.LeaseDuration.Truncate(time.Second) / 50
}

// expiry is, on this replica's clock, the earliest moment another replica
// may take the lease over when the first renewal of the newest renewTime
// second started at anchor, less the drift allowance.
func (c Config) expiry(anchor time.Time) time.Time {
	return anchor.Add(c.LeaseDuration.Truncate(time.Second) - c.driftAllowance())
}

// describe is "<namespace>/<name>", how the lock is named in logs and errors.
func (c Config) describe() string {
	return c.Namespace + "/" + c.Name
}
