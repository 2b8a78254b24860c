// Command replica is one controller-manager replica for the leader-election
// integration tests: a Manager with KCM's flags and one leader-elected
// controller that appends "start <identity> <unix-nanos>" and
// "stop <identity> <unix-nanos>" lines (and "ready …" once it handles
// SIGTERM) to --activity-file, so the test can
// check that no two replicas ever ran it at once. With --enable-sharding
// it also runs replicaset-controller, serviceaccount-controller (pods need
// their namespace's default ServiceAccount) and a sharded controller that writes
// "start:<slot> …" and "stop:<slot> …" lines for each slot it works.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/controllers/replicaset"
	"github.com/ctrlhost/ctrlhost/controllers/serviceaccount"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/shard"
)

func main() {
	opts := manager.NewOptions()
	fs := pflag.NewFlagSet("replica", pflag.ContinueOnError)
	opts.AddFlags(fs)
	activity := fs.String("activity-file", "", "file to append start/stop lines to")
	identity := fs.String("identity", "", "leader election identity")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	opts.LeaderElection.Identity = *identity
	f, err := os.OpenFile(*activity, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	var mu sync.Mutex
	record := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		// One write per line with O_APPEND: lines from replicas never interleave.
		_, _ = fmt.Fprintf(f, "%s %s %d\n", what, *identity, time.Now().UnixNano())
		_ = f.Sync()
	}
	// Handle SIGTERM before saying "ready", so a test never kills a replica
	// that would die of the signal's default action.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	b := manager.NewBuilder("replica-manager").
		WithOptions(opts).
		Register(descriptor.New("elected-controller", func(context.Context,
			descriptor.Context) (descriptor.Controller, error) {
			return descriptor.ControllerFunc(func(ctx context.Context) error {
				record("start")
				<-ctx.Done()
				record("stop")
				return nil
			}), nil
		}))
	if opts.Sharding.Enabled {
		b.Register(replicaset.Descriptor(replicaset.NewOptions()),
			serviceaccount.Descriptor(serviceaccount.NewOptions()),
			descriptor.New("slot-recorder", func(_ context.Context,
				cc descriptor.Context) (descriptor.Controller, error) {
				if cc.Shard == nil || len(cc.Shard.Slots) != 1 {
					return nil, fmt.Errorf("slot-recorder: scope %+v, want one slot", cc.Shard)
				}
				slot := cc.Shard.Slots[0]
				return descriptor.ControllerFunc(func(ctx context.Context) error {
					record(fmt.Sprintf("start:%d", slot))
					<-ctx.Done()
					record(fmt.Sprintf("stop:%d", slot))
					return nil
				}), nil
			}).Sharded(shard.ByNamespace))
	}
	m, err := b.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// client-go logs through klog: route it into the same logger, once,
	// before anything runs.
	defer logging.RouteKlog(m.Logger())()
	record("ready")
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
