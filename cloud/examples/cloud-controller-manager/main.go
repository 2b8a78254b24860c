// Command cloud-controller-manager is a cloud-controller-manager built on
// ctrlhost: the four cloud controllers of k8s.io/cloud-provider over the
// provider --cloud-provider names, with cloud-controller-manager's
// component name (its Lease, user agent and metrics), its secure port
// (10258) and its flags for these controllers. It links the test provider
// "fake" (cloudtest); a real one links its own provider package instead,
// which registers itself with cloudprovider.RegisterCloudProvider.
//
//	go run ./examples/cloud-controller-manager --kubeconfig=$KUBECONFIG \
//	    --cloud-provider=fake --cloud-config=cloud.yaml --cluster-cidr=10.244.0.0/16
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
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/ctrlhost/ctrlhost/cloud"
	"github.com/ctrlhost/ctrlhost/cloud/cloudtest"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/manager"
)

// component is cloud-controller-manager's name.
const component = "cloud-controller-manager"

// securePort is cloud-controller-manager's default --secure-port.
const securePort = 10258

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cloudtest.Register()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// run parses args, builds and runs the manager, and returns the exit code:
// 0 on a clean stop, 1 on any error, 2 on a bad command line.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	host := manager.NewOptions()
	host.Serving.SecurePort = securePort
	controllers := cloud.NewOptions()

	fs := pflag.NewFlagSet(component, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	host.AddFlags(fs)
	controllers.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return 2
	}
	if errs := controllers.Validate(); len(errs) > 0 {
		fmt.Fprintln(stderr, "error:", errors.Join(errs...))
		return 2
	}

	log, done, err := logging.ForProgram(host.Logging, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	defer done()

	provider, err := cloud.NewProvider(host.CloudProvider, host.CloudConfig,
		controllers.AllowUntaggedCloud)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	m, err := manager.NewBuilder(component).
		WithOptions(host).
		WithLogger(log).
		WithInProcessCloudProvider().
		// node-route-controller reads k8s.io/apiserver's process-wide gate;
		// --feature-gates sets it there.
		WithFeatureGate(utilfeature.DefaultMutableFeatureGate).
		// Upstream's controllers register their metrics there.
		WithMetricsGatherer(legacyregistry.DefaultGatherer).
		Register(cloud.Descriptors(cloud.Config{Cloud: provider, Options: controllers,
			Component: component})...).
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
