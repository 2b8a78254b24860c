package logging_test

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/logging"
)

// Wiring logging into a program: flags, the logger, klog.
func Example() {
	opts := logging.NewOptions()
	fs := pflag.NewFlagSet("my-controller-manager", pflag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse([]string{"--logging-format=json", "-v=2"}); err != nil {
		fmt.Println(err)
		return
	}

	log, flush, err := logging.New(opts, os.Stdout)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer flush()
	restore := logging.RouteKlog(log) // process-wide: klog now writes to log
	defer restore()

	log.WithName("deployment").V(2).Info("Synced", "key", "ns/name")
}
