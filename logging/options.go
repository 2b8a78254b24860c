package logging

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// Formats accepted by Options.Format.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// formats lists the accepted formats, for messages.
var formats = []string{FormatText, FormatJSON}

// MaxVerbosity is the highest verbosity zap can represent; higher values
// are treated as this.
const MaxVerbosity = 127

// Options configures the logger New builds. The zero value is usable and
// equals NewOptions().
type Options struct {
	// Format is the output format: "text" (zap's console encoder) or
	// "json". Flag --logging-format, also accepted as --log-format.
	// Default: "text" (also when empty).
	Format string

	// Verbosity is the highest logr V level written: V(n) entries with
	// n <= Verbosity appear, error entries always do. Flag -v / --v.
	// Default: 0.
	Verbosity int
}

// NewOptions returns Options with every default filled in, ready for
// AddFlags.
func NewOptions() Options { return Options{Format: FormatText} }

// AddFlags binds o to fs under kube-controller-manager's names:
// --logging-format (with the hidden alias --log-format) and -v, --v. An
// unknown format is rejected while parsing. Do not also register klog's own
// -v flag on fs; RouteKlog sets klog's verbosity from the logger.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	if o.Format == "" {
		o.Format = FormatText
	}
	v := (*formatValue)(&o.Format)
	fs.Var(
		v,
		"logging-format",
		fmt.Sprintf("Sets the log format. Permitted formats: %s.", quoted(formats)),
	)
	fs.Var(v, "log-format", "Alias of --logging-format.")
	_ = fs.MarkHidden("log-format") // cannot fail: the flag was just added
	fs.IntVarP(&o.Verbosity, "v", "v", o.Verbosity, "number for the log level verbosity")
}

// Validate reports every invalid field, naming its flag.
func (o Options) Validate() error {
	var errs []error
	if err := checkFormat(o.Format); err != nil {
		errs = append(errs, fmt.Errorf("--logging-format: %w", err))
	}
	if o.Verbosity < 0 {
		errs = append(errs, fmt.Errorf("-v: must not be negative, got %d", o.Verbosity))
	}
	return errors.Join(errs...)
}

func checkFormat(f string) error {
	switch f {
	case "", FormatText, FormatJSON:
		return nil
	}
	return fmt.Errorf("unknown format %q; permitted formats: %s", f, quoted(formats))
}

func quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// formatValue is a pflag.Value that accepts only known formats.
type formatValue string

func (f *formatValue) String() string { return string(*f) }
func (f *formatValue) Type() string   { return "string" }

func (f *formatValue) Set(s string) error {
	if err := checkFormat(s); err != nil {
		return err
	}
	*f = formatValue(s)
	return nil
}
