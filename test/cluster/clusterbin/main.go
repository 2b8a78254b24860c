// Command clusterbin builds what test/cluster runs beside testenv's etcd
// and kube-apiserver: kube-scheduler, kube-controller-manager and e2e.test
// (k8s.io/kubernetes, the version testenv's binaries have) and kwok, all
// from the Go module proxy (internal/testbin's BuildCluster). `make
// clusterbin` runs it into the testbin directory:
//
//	go run ./test/cluster/clusterbin -dir _output/testbin/v1.37.1
//
// A binary that is there and reports the right version is kept; each one
// built is logged with the time it took. -e2e=false leaves e2e.test out
// (`make clusterparts`: what the node-failure, rolling-upgrade and load
// runs need).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ctrlhost/ctrlhost/internal/testbin"
)

func main() {
	dir := flag.String("dir", os.Getenv(testbin.EnvTestBin),
		"output directory (default: $"+testbin.EnvTestBin+")")
	goCmd := flag.String("go", os.Getenv("GO"), "the go command (default: $GO, else go)")
	e2e := flag.Bool("e2e", true, "build e2e.test too (only the conformance run needs it)")
	flag.Parse()
	if *dir == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: clusterbin -dir DIR [-go CMD] [-e2e=false]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := testbin.BuildOptions{Dir: *dir, Go: *goCmd, Log: os.Stderr, Stderr: os.Stderr,
		NoE2E: !*e2e}
	if _, err := testbin.Build(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built, err := testbin.BuildCluster(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins := []string{testbin.SchedulerBinary, testbin.ControllerManagerBinary, testbin.KwokBinary}
	if *e2e {
		bins = append(bins, testbin.E2EBinary)
	}
	fmt.Fprintf(os.Stderr, "clusterbin: %s are in %s\n", strings.Join(bins, ", "), built)
}
