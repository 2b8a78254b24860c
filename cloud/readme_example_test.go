package cloud_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/ctrlhost/ctrlhost/cloud"
	"github.com/ctrlhost/ctrlhost/manager"
)

// docs/cloud.md's cloud-controller-manager snippet, compiled; test/docs (in
// the root module) keeps the two identical. main is named mainProgram here.
//
// snippet:begin
func mainProgram() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	host := manager.NewOptions()
	host.Serving.SecurePort = 10258 // cloud-controller-manager's port
	controllers := cloud.NewOptions()
	fs := pflag.NewFlagSet("cloud-controller-manager", pflag.ExitOnError)
	host.AddFlags(fs)        // --cloud-provider, --cloud-config, election, migration, serving, …
	controllers.AddFlags(fs) // --cluster-cidr, --node-monitor-period, --concurrent-service-syncs, …
	_ = fs.Parse(os.Args[1:])

	// The provider package linked in registered itself under its name
	// (cloudprovider.RegisterCloudProvider); --cloud-provider picks it.
	provider, err := cloud.NewProvider(host.CloudProvider, host.CloudConfig, controllers.AllowUntaggedCloud)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	m, err := manager.NewBuilder("cloud-controller-manager").
		WithOptions(host).
		WithInProcessCloudProvider().
		WithFeatureGate(utilfeature.DefaultMutableFeatureGate).
		WithMetricsGatherer(legacyregistry.DefaultGatherer).
		Register(cloud.Descriptors(cloud.Config{Cloud: provider, Options: controllers})...).
		Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// snippet:end

var _ = mainProgram
