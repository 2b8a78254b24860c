// Command intreekcm is a kube-controller-manager as it was before in-tree
// cloud providers were removed (v1.31), for the migration test: ctrlhost's
// ReplicaSet controller and, while --cloud-provider names a provider, the
// three cloud controllers KCM ran in-process (node-route-controller,
// service-lb-controller, cloud-node-lifecycle-controller). With
// --cloud-provider=external it is the KCM a cluster is rolled to when the
// cloud-controller-manager takes them over.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/cloud"
	"github.com/ctrlhost/ctrlhost/cloud/cloudtest"
	"github.com/ctrlhost/ctrlhost/controllers/replicaset"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/manager"
)

const component = "kube-controller-manager"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cloudtest.Register()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	host := manager.NewOptions()
	controllers := cloud.NewOptions()
	rs := replicaset.NewOptions()
	fs := pflag.NewFlagSet(component, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	host.AddFlags(fs)
	controllers.AddFlags(fs)
	rs.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	log, done, err := logging.ForProgram(host.Logging, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	defer done()

	// The cloud controllers are registered either way, so --controllers
	// knows their names; they run only while a provider is named.
	cfg := cloud.Config{Options: controllers, Component: component}
	if host.CloudProvider != "" && host.CloudProvider != "external" {
		if cfg.Cloud, err = cloud.NewProvider(host.CloudProvider, host.CloudConfig,
			controllers.AllowUntaggedCloud); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
	}
	var ds []descriptor.Descriptor
	for _, d := range cloud.Descriptors(cfg) {
		if d.Name() != cloud.CloudNodeController { // a CCM-only controller
			ds = append(ds, d)
		}
	}
	gates := featuregate.NewFeatureGate()
	if err := gates.Add(replicaset.FeatureSpecs()); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	m, err := manager.NewBuilder(component).
		WithOptions(host).
		WithLogger(log).
		WithFeatureGate(gates).
		WithInProcessCloudProvider().
		Register(replicaset.Descriptor(rs)).
		Register(ds...).
		Build()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}
