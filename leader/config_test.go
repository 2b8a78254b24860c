package leader

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/utils/clock"
)

func TestWithDefaults(t *testing.T) {
	var zero Config
	got := zero.WithDefaults("my-manager")
	if zero != (Config{}) {
		t.Errorf("WithDefaults modified its receiver: %+v", zero)
	}
	want := Config{
		ResourceLock:  "leases",
		Namespace:     "kube-system",
		Name:          "my-manager",
		Identity:      got.Identity,
		LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   2 * time.Second,
		Clock:         clock.RealClock{},
	}
	if got != want {
		t.Errorf("WithDefaults = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}

	host, _ := os.Hostname()
	prefix, id, ok := strings.Cut(got.Identity, "_")
	if host == "" {
		id, ok = got.Identity, true
	}
	if !ok || (host != "" && prefix != host) {
		t.Errorf("Identity = %q, want %q_<uuid>", got.Identity, host)
	}
	if _, err := uuid.Parse(id); err != nil {
		t.Errorf("Identity %q does not end in a UUID: %v", got.Identity, err)
	}
	if again := zero.WithDefaults("my-manager"); again.Identity == got.Identity {
		t.Errorf("two defaulted identities are equal: %q", got.Identity)
	}

	set := Config{
		Namespace: "ns", Name: "n", Identity: "me", KeepLeaseOnCancel: true,
		LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 5 * time.Second,
	}
	if got := set.WithDefaults("ignored"); got.Namespace != "ns" || got.Name != "n" || got.Identity != "me" ||
		!got.KeepLeaseOnCancel || got.LeaseDuration != 30*time.Second ||
		got.RenewDeadline != 20*time.Second ||
		got.RetryPeriod != 5*time.Second {
		t.Errorf("WithDefaults overrode set fields: %+v", got)
	}
}

func TestValidate(t *testing.T) {
	valid := Config{}.WithDefaults("c")
	with := func(f func(*Config)) Config {
		c := valid
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings; nil: valid
	}{
		{name: "defaults", cfg: valid},
		{name: "small but valid", cfg: testConfig("a")},
		{name: "endpoints lock", cfg: with(func(c *Config) { c.ResourceLock = "endpoints" }),
			want: []string{"ResourceLock", "--leader-elect-resource-lock", `"endpoints"`, "removed"}},
		{name: "unknown lock", cfg: with(func(c *Config) { c.ResourceLock = "etcd" }),
			want: []string{"ResourceLock", "--leader-elect-resource-lock", `must be "leases"`}},
		{name: "no namespace", cfg: with(func(c *Config) { c.Namespace = "" }),
			want: []string{"Namespace", "--leader-elect-resource-namespace"}},
		{name: "bad namespace", cfg: with(func(c *Config) { c.Namespace = "Kube_System" }),
			want: []string{"Namespace", "--leader-elect-resource-namespace", "not a valid namespace"}},
		{name: "no name", cfg: with(func(c *Config) { c.Name = "" }),
			want: []string{"Name", "--leader-elect-resource-name", "must not be empty"}},
		{name: "bad name", cfg: with(func(c *Config) { c.Name = "my/manager" }),
			want: []string{"Name", "--leader-elect-resource-name", "not a valid Lease name"}},
		{name: "no identity", cfg: with(func(c *Config) { c.Identity = "" }),
			want: []string{"Identity", "must not be empty"}},
		{name: "zero durations", cfg: with(func(c *Config) { c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 0, 0, 0 }),
			want: []string{"LeaseDuration (--leader-elect-lease-duration) must be greater than zero",
				"RenewDeadline (--leader-elect-renew-deadline) must be greater than zero",
				"RetryPeriod (--leader-elect-retry-period) must be greater than zero"}},
		{name: "negative retry", cfg: with(func(c *Config) { c.RetryPeriod = -time.Second }),
			want: []string{"RetryPeriod (--leader-elect-retry-period) must be greater than zero, got -1s"}},
		{name: "lease not above renew", cfg: with(func(c *Config) { c.LeaseDuration = c.RenewDeadline }),
			want: []string{"LeaseDuration (--leader-elect-lease-duration) must be greater than RenewDeadline (--leader-elect-renew-deadline): 10s <= 10s"}},
		{name: "lease above renew only by a fraction of a second", cfg: with(func(c *Config) { c.LeaseDuration = 10500 * time.Millisecond }),
			want: []string{"must be greater than RenewDeadline", "whole seconds"}},
		{name: "sub-second lease", cfg: with(func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 500*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond
		}), want: []string{"LeaseDuration (--leader-elect-lease-duration) must be at least 1s"}},
		{name: "renew not above jittered retry", cfg: with(func(c *Config) { c.RetryPeriod = 9 * time.Second }),
			want: []string{"RenewDeadline (--leader-elect-renew-deadline) must be greater than RetryPeriod (--leader-elect-retry-period) × 1.2", "10s <= 10.8s"}},
		{name: "no stop budget", cfg: with(func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 2*time.Second, 1900*time.Millisecond, time.Second
		}), want: []string{"LeaseDuration (--leader-elect-lease-duration) must exceed RenewDeadline (--leader-elect-renew-deadline) " +
			"+ RetryPeriod (--leader-elect-retry-period) + 1s", "+ LeaseDuration/50", "2s <= 1.9s + 1s + 1s + 40ms"}},
		{name: "no room for the renewTime's second", cfg: with(func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 2*time.Second, 1400*time.Millisecond, 300*time.Millisecond
		}), want: []string{"2s <= 1.4s + 300ms + 1s + 40ms"}},
		{name: "stop budget eaten by the drift allowance", cfg: with(func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 10*time.Second, 7900*time.Millisecond, 1950*time.Millisecond
		}), want: []string{"must exceed RenewDeadline", "10s <= 7.9s + 1.95s + 1s + 200ms"}},
		{name: "every problem at once", cfg: Config{ResourceLock: "configmaps", LeaseDuration: time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 2 * time.Second},
			want: []string{"--leader-elect-resource-lock", "--leader-elect-resource-namespace", "--leader-elect-resource-name", "Identity",
				"must be greater than RenewDeadline", "must be greater than RetryPeriod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			checkErr(t, err, tc.want)
			if err != nil && !strings.HasPrefix(err.Error(), "leader: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestStopBudget(t *testing.T) {
	for _, tc := range []struct {
		name          string
		lease, renew  time.Duration
		retry, budget time.Duration
	}{
		// LeaseDuration - RenewDeadline - RetryPeriod - 1s - LeaseDuration/50.
		{"KCM defaults", 15 * time.Second, 10 * time.Second, 2 * time.Second, 1700 * time.Millisecond},
		{"test settings", 2 * time.Second, 600 * time.Millisecond, 200 * time.Millisecond, 160 * time.Millisecond},
		{"fraction of a second dropped", 15900 * time.Millisecond, 10 * time.Second, 2 * time.Second, 1700 * time.Millisecond},
		// No floor: settings without room are rejected by Validate, not
		// given a budget that cannot keep the promise.
		{"no room", 11 * time.Second, 10 * time.Second, 8 * time.Second, -8220 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{LeaseDuration: tc.lease, RenewDeadline: tc.renew, RetryPeriod: tc.retry}
			if got := c.StopBudget(); got != tc.budget {
				t.Errorf("StopBudget() = %v, want %v", got, tc.budget)
			}
		})
	}
}
