package cloud_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/cloud"
	"github.com/ctrlhost/ctrlhost/controllers/builtin"
	"github.com/ctrlhost/ctrlhost/manager"
)

// One program may take both the cloud controllers' flags and the native
// built-ins': KCM's --cluster-name, --cluster-cidr, --allocate-node-cidrs
// and --node-monitor-period are one flag each, read by both, whichever
// AddFlags comes first (before, the second registration panicked).
func TestCloudAndBuiltinFlagsShareKCMsFlags(t *testing.T) {
	args := []string{"--cluster-name=prod", "--cluster-cidr=10.64.0.0/14", "--allocate-node-cidrs",
		"--node-monitor-period=7s"}
	for _, cloudFirst := range []bool{true, false} {
		fs := pflag.NewFlagSet("kcm", pflag.ContinueOnError)
		c, b := cloud.NewOptions(), builtin.NewOptions()
		if cloudFirst {
			c.AddFlags(fs)
			b.AddFlags(fs)
		} else {
			b.AddFlags(fs)
			c.AddFlags(fs)
		}
		if err := fs.Parse(args); err != nil {
			t.Fatalf("cloud first %v: %v", cloudFirst, err)
		}
		got := []any{c.ClusterName, c.ClusterCIDR, c.AllocateNodeCIDRs, c.NodeMonitorPeriod,
			b.ClusterName, b.NodeIPAM.ClusterCIDR, b.NodeIPAM.AllocateNodeCIDRs,
			b.NodeLifecycle.NodeMonitorPeriod}
		want := []any{"prod", "10.64.0.0/14", true, 7 * time.Second,
			"prod", "10.64.0.0/14", true, 7 * time.Second}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("cloud first %v: got %v, want %v", cloudFirst, got, want)
				break
			}
		}
	}
}

// TestHelpNamesFlagsOfItsSet: a help text that names another flag names
// one the reader can type. Every flag of each set a cloud controller
// manager's program registers is walked: the CCM alone (its host's flags
// and the cloud controllers'), and the CCM beside a KCM in one binary,
// its host's flags under "ccm-" (--ccm-tls-cert-file's help names
// --ccm-tls-private-key-file, not the KCM's --tls-private-key-file). A
// flag is named as "--name", or as a flag's name on its own.
func TestHelpNamesFlagsOfItsSet(t *testing.T) {
	known := map[string]bool{}
	every := pflag.NewFlagSet("every", pflag.ContinueOnError)
	o, c := manager.NewOptions(), cloud.NewOptions()
	o.AddFlags(every)
	c.AddFlags(every)
	every.VisitAll(func(f *pflag.Flag) { known[f.Name] = true })

	alone := pflag.NewFlagSet("cloud-controller-manager", pflag.ContinueOnError)
	host, controllers := manager.NewOptions(), cloud.NewOptions()
	host.AddFlags(alone)
	controllers.AddFlags(alone)
	prefixed := pflag.NewFlagSet("ccm-", pflag.ContinueOnError)
	proc, ccm, ccmControllers := manager.NewOptions(), manager.NewOptions(), cloud.NewOptions()
	proc.AddProcessFlags(prefixed)
	ccm.AddManagerFlags(prefixed, "ccm-")
	ccmControllers.AddFlags(prefixed)

	ref := regexp.MustCompile(`(--)?[a-z0-9]+(-[a-z0-9]+)*`)
	for _, fs := range []*pflag.FlagSet{alone, prefixed} {
		refs := 0
		fs.VisitAll(func(f *pflag.Flag) {
			for _, loc := range ref.FindAllStringIndex(f.Usage, -1) {
				i, j := loc[0], loc[1]
				if i > 0 && nameByte(f.Usage[i-1]) || j < len(f.Usage) && nameByte(f.Usage[j]) {
					continue // part of a longer word
				}
				name, dashed := strings.CutPrefix(f.Usage[i:j], "--")
				if !dashed && (!strings.Contains(name, "-") || !known[name]) {
					continue // a word
				}
				refs++
				if fs.Lookup(name) == nil {
					t.Errorf("%s: --%s's help names %s, no flag of this set: %q", fs.Name(),
						f.Name, name, f.Usage)
				}
			}
		})
		if refs < 10 {
			t.Errorf("%s: %d references to other flags found; the walk finds none", fs.Name(), refs)
		}
	}
}

func nameByte(c byte) bool {
	return c == '-' || c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' ||
		'0' <= c && c <= '9'
}
