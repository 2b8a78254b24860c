// Package sharedflag registers a flag that more than one set of options
// reads. KCM has one --root-ca-file, read by the root-CA publisher and by
// the service-account token controller, and one --cluster-cidr, read by
// node IPAM and by the cloud route controller; in ctrlhost each has its
// own Options, and any of their AddFlags may be called on one flag set, in
// any order.
//
// # Guarantees
//
//   - The first caller registers the flag; each later caller shares it: a
//     value set on the command line reaches every caller's variable.
//   - A later caller's variable starts with the flag's current value.
//   - Two callers whose types cannot share a value (a bool where a string
//     flag is) never panic: setting the flag fails, naming it and both
//     types, so the command line is refused.
//
// # Non-guarantees
//
//   - The first caller's usage text, default and type are the flag's;
//     later callers' are ignored.
package sharedflag

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// String registers name on fs as a string flag bound to p, or, when fs has
// the flag already, makes its value reach p as well.
func String(fs *pflag.FlagSet, p *string, name, usage string) {
	share(fs, name, func(s *pflag.FlagSet) { s.StringVar(p, name, *p, usage) })
}

// Bool is String for a bool flag.
func Bool(fs *pflag.FlagSet, p *bool, name, usage string) {
	share(fs, name, func(s *pflag.FlagSet) { s.BoolVar(p, name, *p, usage) })
}

// Duration is String for a duration flag.
func Duration(fs *pflag.FlagSet, p *time.Duration, name, usage string) {
	share(fs, name, func(s *pflag.FlagSet) { s.DurationVar(p, name, *p, usage) })
}

// share registers the flag define defines on fs, or, when fs has a flag of
// that name already, tees its value into the one define would have made.
func share(fs *pflag.FlagSet, name string, define func(*pflag.FlagSet)) {
	f := fs.Lookup(name)
	if f == nil {
		define(fs)
		return
	}
	own := pflag.NewFlagSet(name, pflag.ContinueOnError)
	define(own)
	mine := own.Lookup(name).Value
	if err := mine.Set(f.Value.String()); err != nil {
		err := fmt.Errorf("--%s is registered twice, as a %s and as a %s: one program "+
			"cannot hold both sets of options", name, f.Value.Type(), mine.Type())
		f.Value = &broken{Value: f.Value, err: err}
		return
	}
	f.Value = &tee{Value: f.Value, also: mine}
}

// tee is a flag value that writes through to one more value.
type tee struct {
	pflag.Value
	also pflag.Value
}

func (t *tee) Set(s string) error {
	if err := t.Value.Set(s); err != nil {
		return err
	}
	// The first value parsed s; the second takes its canonical form.
	return t.also.Set(t.Value.String())
}

// broken is a flag two callers registered with types that cannot share a
// value: setting it fails, naming both.
type broken struct {
	pflag.Value
	err error
}

func (b *broken) Set(string) error { return b.err }
