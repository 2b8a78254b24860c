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
// Output formats. Both write one line per entry carrying the time, the level,
// the logger name (the names given with logr's WithName, joined by "."),
// the caller, the message and then the key/value pairs:
//
//	text: 2025-01-02T15:04:05.000Z	INFO	deployment	sync/sync.go:42	Synced	{"key": "ns/name"}
//	json: {"level":"info","ts":1735830245000.123,"logger":"deployment","caller":"sync/sync.go:42","msg":"Synced","v":0,"key":"ns/name"}
//
// JSON follows kube-controller-manager's JSON format ("ts" in milliseconds
// since the epoch, "v" for the verbosity of info entries, "err" for the
// error of error entries) and adds "level" ("info" or "error"). The text
// format's level column reads INFO or ERROR; verbosity is not shown.
// Neither format adds stack traces or samples entries.
package logging
