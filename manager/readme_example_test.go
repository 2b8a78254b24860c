package manager_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/logging"
	"github.com/ctrlhost/ctrlhost/manager"
)

// The README's controllers, as packages would export them.
var (
	widgets = struct{ Init descriptor.InitFunc }{Init: nopInit}
	gadgets = struct{ Init descriptor.InitFunc }{Init: nopInit}
)

func nopInit(context.Context, descriptor.Context) (descriptor.Controller, error) { return nil, nil }

// The README's "Embedding" snippet, compiled; test/docs keeps the two
// identical. main is named mainProgram here.
//
// snippet:begin
func mainProgram() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	opts := manager.NewOptions() // KCM defaults: --leader-elect, 10257, 12h resync, …
	fs := pflag.NewFlagSet("my-manager", pflag.ExitOnError)
	opts.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])

	// The logger first, with klog (client-go's) routed into it, so that
	// Build, client-go and the controllers all log in one format.
	logger, done, err := logging.ForProgram(opts.Logging, os.Stderr)
	if err != nil {
		return err // a bad --logging-format or -v
	}
	defer done() // flushes, and gives klog back

	m, err := manager.NewBuilder("my-controller-manager").
		WithOptions(opts).
		WithLogger(logger).
		Register(
			descriptor.New("widget-controller", widgets.Init).WithAliases("widget"),
			descriptor.New("gadget-controller", gadgets.Init).DisabledByDefault(),
		).
		Build() // every invalid input is reported here, all at once
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return m.Run(ctx) // lost lease, failed controller, …
}

// snippet:end

var _ = mainProgram
