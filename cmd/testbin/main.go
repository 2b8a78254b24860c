// Command testbin builds the etcd and kube-apiserver binaries that package
// testenv starts, for the ctrlhost version it belongs to, from the Go module
// proxy. From a downstream module:
//
//	go run github.com/ctrlhost/ctrlhost/cmd/testbin@<ctrlhost version>
//
// builds them into $CTRLHOST_TESTBIN if set, else the per-user cache
// (<user cache dir>/ctrlhost/testbin/<Kubernetes version>), where testenv
// finds them with no configuration. Running it again is cheap: binaries
// that report the right version are kept.
//
// Flags:
//
//	-dir DIR           build into DIR instead
//	-go CMD            the go command (default: $GO, else go)
//	-minor MINOR       the kube-apiserver minor of the tested window, such as 1.34
//	                   (default: the newest, the one testenv expects by default)
//	-list-minors       print the tested window's minors, oldest first, and exit
//	-print-dir         print the output directory and exit
//	-print-version     print the Kubernetes version and exit
//	-write-module DIR  write the tools module (go.mod, go.sum) into DIR and exit
//
// It imports nothing but the standard library and internal/testbin, so that
// `go run` compiles it in seconds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ctrlhost/ctrlhost/internal/testbin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command without the process around it: it returns the exit
// code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testbin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String(
		"dir",
		"",
		"output directory (default: $"+testbin.EnvTestBin+", else the per-user cache directory)",
	)
	goCmd := fs.String("go", os.Getenv("GO"), "the go command (default: $GO, else go)")
	printDir := fs.Bool("print-dir", false, "print the output directory and exit")
	minor := fs.String("minor", "", "the kube-apiserver minor to build, one of "+
		strings.Join(testbin.Minors(), ", ")+" (default: the newest)")
	listMinors := fs.Bool("list-minors", false, "print the tested window's minors and exit")
	printVersion := fs.Bool(
		"print-version",
		false,
		"print the Kubernetes version of the binaries and exit",
	)
	writeModule := fs.String(
		"write-module",
		"",
		"write the tools module (go.mod, go.sum) into this directory and exit",
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "testbin: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *listMinors {
		fmt.Fprintln(stdout, strings.Join(testbin.Minors(), " "))
		return 0
	}
	module, err := testbin.ModuleOf(*minor)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	versions, err := module.Versions()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	switch {
	case *printVersion:
		fmt.Fprintln(stdout, versions.Kubernetes)
		return 0
	case *writeModule != "":
		if err := module.Write(*writeModule); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	out, err := outputDir(*dir, versions.Kubernetes)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *printDir {
		fmt.Fprintln(stdout, out)
		return 0
	}
	built, err := testbin.Build(
		ctx,
		testbin.BuildOptions{Dir: out, Go: *goCmd, Minor: module.Minor(), Log: stderr,
			Stderr: stderr},
	)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(
		stderr,
		"testbin: %s and %s are in %s\n",
		testbin.EtcdBinary,
		testbin.APIServerBinary,
		built,
	)
	return 0
}

// outputDir is -dir, else $CTRLHOST_TESTBIN, else the per-user cache
// directory: the first places testenv looks, in its order.
func outputDir(flagDir, kubeVersion string) (string, error) {
	if flagDir != "" {
		return flagDir, nil
	}
	if env := os.Getenv(testbin.EnvTestBin); env != "" {
		return env, nil
	}
	return testbin.CacheDir(kubeVersion)
}
