package cloud_test

import (
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/cloud"
	"github.com/ctrlhost/ctrlhost/controllers/builtin"
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
