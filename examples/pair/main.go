// Command pair runs two Managers in one process, as a single-binary
// distribution runs a controller manager and a cloud controller manager:
// the native built-ins under kube-controller-manager's name, and a
// garbage-collecting "pod janitor" under its own, each with its own
// Lease, port and --controllers, sharing one command line, one logger,
// one feature gate and one API server; when either fails (or loses its
// Lease), both stop. --help shows the flags in sections, as
// kube-controller-manager's does: the process's and the built-ins'
// Manager's under KCM's titles, the janitor's under titles of their own
// ("Generic (--janitor-*) flags:").
//
//	pair --kubeconfig=$HOME/.kube/config \
//	  --controllers='*,-pod-garbage-collector-controller' \
//	  --janitor-controllers=pod-garbage-collector-controller --janitor-secure-port=10260
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

	"github.com/ctrlhost/ctrlhost/controllers/builtin"
	"github.com/ctrlhost/ctrlhost/controllers/podgc"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/manager"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// run returns the exit code: 0 on a clean stop, 1 on an error, 2 on a bad
// command line.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	// The process's flags once; each Manager's own under its prefix, in
	// the sections --help shows; one flag set parses them all.
	proc, kcm, janitor := manager.NewOptions(), manager.NewOptions(), manager.NewOptions()
	janitor.Serving.SecurePort = 10260
	builtins, janitorGC := builtin.NewOptions(), podgc.NewOptions()
	var sections manager.FlagSections
	kcm.AddManagerFlagSections(&sections, "")
	proc.AddProcessFlagSections(&sections)
	builtins.AddFlags(sections.FlagSet("built-in controllers"))
	janitor.AddManagerFlagSections(&sections, "janitor-")
	fs := pflag.NewFlagSet("pair", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	sections.AddTo(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage of pair:")
		sections.Print(stderr, 0)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	kcm.ShareProcess(proc)
	janitor.ShareProcess(proc)
	// The janitor collects pods on the settings of the built-in's flags.
	janitorGC.TerminatedPodGCThreshold = builtins.PodGC.TerminatedPodGCThreshold

	log, done, err := logging.ForProgram(proc.Logging, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	defer done()
	// One gate for the process: both Managers read it, and must agree on
	// what --feature-gates sets. ShareProcess gave both the process's; a
	// second Build that set it otherwise would fail, naming both settings,
	// and leave the gate as the first Build set it.
	gates, err := builtin.NewFeatureGate()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	first, err := manager.NewBuilder("kube-controller-manager").WithOptions(kcm).WithLogger(log).
		WithFeatureGate(gates).WithFlags(fs).Register(builtins.Descriptors()...).Build()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	second, err := manager.NewBuilder("pod-janitor").WithOptions(janitor).WithLogger(log).
		WithFeatureGate(gates).WithFlags(fs).Register(podgc.Descriptor(janitorGC)).Build()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// RunAll's error names the Manager that failed: manager "pod-janitor": ...
	if err := manager.RunAll(ctx, first, second); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}
