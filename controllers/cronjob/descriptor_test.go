package cronjob_test

import (
	"testing"

	"github.com/ctrlhost/ctrlhost/controllers/cronjob"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/shard"
)

func TestDescriptorAndFlags(t *testing.T) {
	controllertest.CheckIdentity(
		t,
		cronjob.Descriptor(cronjob.NewOptions()),
		controllertest.Identity{Name: "cronjob-controller", Alias: "cronjob"},
	)
	o := cronjob.NewOptions()
	f := controllertest.ParseFlag(
		t,
		o.AddFlags,
		"concurrent-cron-job-syncs",
		"--concurrent-cron-job-syncs=9",
	)
	if f.DefValue != "5" ||
		f.Usage != "The number of cron job objects that are allowed to sync concurrently. Larger number = more responsive jobs, but more CPU (and network) load" {
		t.Errorf("default %q usage %q", f.DefValue, f.Usage)
	}
	if o.ConcurrentCronJobSyncs != 9 {
		t.Errorf("ConcurrentCronJobSyncs %d, want 9", o.ConcurrentCronJobSyncs)
	}
	if keying, sharded := cronjob.Descriptor(cronjob.NewOptions()).IsSharded(); !sharded ||
		keying != shard.ByNamespace {
		t.Errorf(
			"IsSharded = %v, %v; want sharded by namespace (a CronJob and its Jobs share one)",
			keying,
			sharded,
		)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       cronjob.Options
		wantErr []string
	}{
		{"defaults", cronjob.NewOptions(), nil},
		{
			"zero workers",
			cronjob.Options{},
			[]string{
				`descriptor "cronjob-controller": --concurrent-cron-job-syncs: must be at least 1, got 0`,
			},
		},
		{
			"negative workers",
			cronjob.Options{ConcurrentCronJobSyncs: -2},
			[]string{"--concurrent-cron-job-syncs: must be at least 1, got -2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, cronjob.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

// TestRunWithCancelledContext: Run returns and releases its queue even
// when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(t, cronjob.Descriptor(cronjob.NewOptions()))
}
