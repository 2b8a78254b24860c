// Command kube-controller-manager is a drop-in replacement for upstream's:
// every controller of k8s.io/kubernetes (the version the upstream module
// requires), run by ctrlhost's host — its leader election, fencing, health
// checks, bounded shutdown and serving. It takes KCM's command line: the
// controllers' flags are upstream's own option groups, the host's flags
// carry KCM's names, flag names are normalised ("_" → "-") as KCM does,
// and a KCM flag this host does not implement is an error naming it.
//
//	kube-controller-manager --kubeconfig=/etc/kubernetes/controller-manager.conf \
//	  --controllers='*,bootstrapsigner,tokencleaner' --use-service-account-credentials=true ...
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/upstream/kcm"
)

// component is KCM's name: the Lease, the user agent, the metrics prefix.
const component = "kube-controller-manager"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, builds and runs the manager, and returns the exit code:
// 0 on a clean stop (and for --help and --version), 1 on any error once
// running (a lost lease included, as KCM), 2 on a bad command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	p, code, done := prepare(args, stdout, stderr)
	if done {
		return code
	}
	log, finish, err := logging.ForProgram(p.host.Logging, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	defer finish()
	log.Info("Starting kube-controller-manager's controllers on ctrlhost", "version", version())

	m, err := p.builder(log).Build()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

// program is a parsed and validated command line.
type program struct {
	host        manager.Options
	descriptors []descriptor.Descriptor
	flags       *pflag.FlagSet // as parsed, for /flagz
}

// builder is the Manager's builder for p: KCM's component name, and the
// process-wide feature gate and metrics registry upstream controllers use.
func (p *program) builder(log logr.Logger) *manager.Builder {
	return manager.NewBuilder(component).
		WithOptions(p.host).
		WithLogger(log).
		// Upstream controllers read the process-wide gate: --feature-gates
		// sets it, and descriptors' gates are checked against it.
		WithFeatureGate(utilfeature.DefaultMutableFeatureGate).
		WithMetricsGatherer(legacyregistry.DefaultGatherer).
		// /statusz and /flagz as KCM's: its version, its command line.
		WithVersion(kubernetesVersion()).
		WithFlags(p.flags).
		Register(p.descriptors...)
}

// prepare parses and validates args. done means the process should exit
// with code (help, version, or a bad command line, reported on stderr).
func prepare(args []string, stdout, stderr io.Writer) (p *program, code int, done bool) {
	host := manager.NewOptions()
	ctl, err := kcm.NewOptions()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return nil, 1, true
	}
	fs, showVersion := flags(&host, ctl, stdout)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, 0, true
		}
		fmt.Fprintln(stderr, "error:", err)
		return nil, 2, true
	}
	if *showVersion {
		fmt.Fprintln(stdout, version())
		return nil, 0, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "error: unexpected arguments: %v\n", fs.Args())
		return nil, 2, true
	}
	if errs := ctl.Validate(host); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(stderr, "error:", err)
		}
		return nil, 2, true
	}
	cfg, err := ctl.Config(host)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return nil, 2, true
	}
	// KCM starts the token controller whatever --controllers says.
	host.Controllers = kcm.AlwaysOn(host.Controllers)
	descs, err := kcm.Descriptors(kcm.Config{Component: cfg})
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return nil, 2, true
	}
	return &program{host: host, descriptors: descs, flags: fs}, 0, false
}

// flags is KCM's command line: sections as KCM's --help, then the host's
// own, and --version.
func flags(host *manager.Options, ctl *kcm.Options, stdout io.Writer) (*pflag.FlagSet, *bool) {
	hostFS := pflag.NewFlagSet("host", pflag.ContinueOnError)
	host.AddFlags(hostFS)
	var fss cliflag.NamedFlagSets
	ctl.AddFlags(&fss, hostFS)
	showVersion := fss.FlagSet("global").Bool("version", false, "Print version information and quit.")

	fs := pflag.NewFlagSet(component, pflag.ContinueOnError)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
	fs.Usage = func() {
		fmt.Fprintf(stdout,
			"The Kubernetes controller manager, hosted by ctrlhost.\n\nUsage:\n  %s [flags]\n", component)
		cliflag.PrintSections(stdout, fss, 0)
	}
	return fs, showVersion
}

// version names the Kubernetes release whose controllers this binary runs,
// in KCM's --version format.
func version() string { return "Kubernetes " + kubernetesVersion() }

// kubernetesVersion is the version of k8s.io/kubernetes this binary was
// built with ("(unknown)" without build information).
func kubernetesVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/kubernetes" {
				return d.Version
			}
		}
	}
	return "(unknown)"
}
