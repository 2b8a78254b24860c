// Package sharedflag registers a flag that more than one built-in reads.
// KCM has one --root-ca-file, read by the root-CA publisher and by the
// service-account token controller; in ctrlhost each has its own Options,
// and both AddFlags may be called on one flag set, in either order.
//
// # Guarantees
//
//   - The first caller registers the flag; each later caller shares it: a
//     value set on the command line reaches every caller's variable.
//   - A later caller's variable starts with the flag's current value.
//
// # Non-guarantees
//
//   - The first caller's usage text and default are the flag's; later
//     callers' are ignored.
//   - Only string flags are shared.
package sharedflag

import "github.com/spf13/pflag"

// String registers name on fs as a string flag bound to p, or, when fs has
// the flag already, makes its value reach p as well.
func String(fs *pflag.FlagSet, p *string, name, usage string) {
	f := fs.Lookup(name)
	if f == nil {
		fs.StringVar(p, name, *p, usage)
		return
	}
	*p = f.Value.String()
	f.Value = &tee{Value: f.Value, also: p}
}

// tee is a flag value that writes through to one more variable.
type tee struct {
	pflag.Value
	also *string
}

func (t *tee) Set(s string) error {
	if err := t.Value.Set(s); err != nil {
		return err
	}
	*t.also = t.Value.String()
	return nil
}
