// Command kcm is a kube-controller-manager built on ctrlhost with every
// built-in controller ctrlhost ships. It takes KCM's flags for the host and
// for those controllers, so a command line written for upstream KCM runs it
// unchanged as far as these controllers go; a flag ctrlhost does not
// implement is rejected as unknown, never silently ignored. It uses KCM's
// component name, so it competes for the same kube-system Lease.
//
//	go run ./examples/kcm --kubeconfig=$KUBECONFIG --controllers='*,tokencleaner'
//
// --leader-elect=false
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ctrlhost/ctrlhost/controllers/builtin"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/manager"
)

// component is KCM's name: the Lease, the user agent, the metrics prefix.
const component = "kube-controller-manager"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// run parses args, builds and runs the manager, and returns the exit code:
// 0 on a clean stop, 1 on any error (a lost lease included, as KCM), 2 on a
// bad command line.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	host := manager.NewOptions()
	builtins := builtin.NewOptions()

	fs := pflag.NewFlagSet(component, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	host.AddFlags(fs)
	builtins.AddFlags(fs)
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

	// The logger first, with client-go's klog routed into it, so that Build
	// already logs in the chosen format, to stderr.
	log, done, err := logging.ForProgram(host.Logging, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	defer done()

	// The gates the built-ins consult, so that --feature-gates sets them.
	gates, err := builtin.NewFeatureGate()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	m, err := manager.NewBuilder(component).
		WithOptions(host).
		WithLogger(log).
		WithFeatureGate(gates).
		WithFlags(fs).
		Register(builtins.Descriptors()...).
		Build()
	if err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, manager.ErrUnknownController) {
			fmt.Fprintln(
				stderr,
				"This program hosts ctrlhost's native built-ins only. Every kube-controller-manager "+
					"controller is in the upstream module's drop-in binary, "+
					"github.com/ctrlhost/ctrlhost/upstream/cmd/kube-controller-manager.",
			)
		}
		return 1
	}
	// As KCM would fail later, in a controller, on an API or field an older
	// server lacks: refused at start instead, with KCM's skew rule.
	if err := checkServer(ctx, host); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

// serverWait bounds how long checkServer waits for the API server to
// answer, as KCM waits for its health at start.
const serverWait = time.Minute

// checkServer asks the API server host's flags name for its version, every
// second until it answers or serverWait passed, and applies the built-ins'
// skew rule (builtin.CheckServerVersion). Told to stop meanwhile, it
// checks nothing.
func checkServer(ctx context.Context, host manager.Options) error {
	cfg, err := clientcmd.BuildConfigFromFlags(host.Master, host.Kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %q / --master %q: %w", host.Kubeconfig, host.Master, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	var v *version.Info
	var last error
	err = wait.PollUntilContextTimeout(ctx, time.Second, serverWait, true,
		func(context.Context) (bool, error) {
			v, last = dc.ServerVersion()
			return last == nil, nil
		})
	if ctx.Err() != nil {
		return nil // told to stop: Run returns at once, and nothing runs
	}
	if err != nil {
		return fmt.Errorf("the API server did not say its version within %v: %w (last: %v)",
			serverWait, err, last)
	}
	return builtin.CheckServerVersion(v)
}
