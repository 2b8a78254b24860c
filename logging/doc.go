// Package logging builds the logger of a controller host: zap, behind the
// logr API through zapr, in a text or JSON format, with logr verbosity
// mapped onto zap levels; and it routes klog, which client-go and other
// Kubernetes libraries log through, into that logger.
//
// Options carries the settings, bound to kube-controller-manager's flag
// names by AddFlags (--logging-format, -v/--v). New builds a logger and
// touches no global state. RouteKlog does: klog is configured process-wide,
// so routing it affects every goroutine and every logger in the process,
// and the last call wins.
//
// # Order in a program
//
// A program sets up logging before it builds anything, so that every line,
// its own, the host's and client-go's, comes out in one format:
//
//  1. parse the flags (manager.Options.AddFlags binds --logging-format and -v);
//  2. build the logger with New(opts.Logging, os.Stderr), and defer its flush;
//  3. route klog into it with RouteKlog, and defer the restore;
//  4. hand it to the host with manager.Builder.WithLogger, then Build and Run.
//
// New needs nothing from the host, so it can run before Build; Build, which
// may load a kubeconfig through client-go, then already logs through it.
// Without WithLogger, Build makes the same logger from Options itself, but
// only once Build runs, so klog can be routed only after Build.
//
// Output formats. Both write one line per entry carrying the time, the level,
// the logger name (the names given with logr's WithName, joined by "."),
// the caller, the message and then the key/value pairs:
//
//	text: 2025-01-02T15:04:05.000Z	INFO	deployment	sync/sync.go:42	Synced	{"key": "ns/name"}
//	json: {"level":"info","ts":1735830245000.123,"logger":"deployment",
//	      "caller":"sync/sync.go:42","msg":"Synced","v":0,"key":"ns/name"}
//
// JSON follows kube-controller-manager's JSON format ("ts" in milliseconds
// since the epoch, "v" for the verbosity of info entries, "err" for the
// error of error entries) and adds "level" ("info" or "error"). The text
// format's level column reads INFO or ERROR; verbosity is not shown.
// Neither format adds stack traces or samples entries.
package logging
