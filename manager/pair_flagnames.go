package manager

import (
	"sync"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/internal/flagprefix"
)

// How a Manager's messages name its flags. Options bound with
// AddManagerFlags(fs, "janitor-") remember the prefix: that Manager's
// user typed --janitor-controllers, and its Build errors, its warnings
// and its log lines say so, though the code that writes them (here, and
// in packages serving, leader and shard) knows the flags under KCM's
// names. Every such text goes through o.renamer() (internal/flagprefix),
// at the edge: Build's error, the Manager's logger, RunAll's error.
// Options bound otherwise, or filled in code, keep KCM's names.

// managerFlags holds managerFlagNames' answer.
var managerFlags struct {
	once  sync.Once
	names map[string]bool
}

// managerFlagNames are the KCM names of the flags AddManagerFlags adds:
// every flag of AddFlags that is not process-wide.
func managerFlagNames() map[string]bool {
	managerFlags.once.Do(func() {
		var o Options
		fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		o.addFlagsWhere(fs, "", false)
		managerFlags.names = map[string]bool{}
		fs.VisitAll(func(f *pflag.Flag) { managerFlags.names[f.Name] = true })
	})
	return managerFlags.names
}

// renamer renames the flags o's user types with o's prefix.
func (o Options) renamer() flagprefix.Renamer {
	return flagprefix.Renamer{Prefix: o.flagPrefix, Names: managerFlagNames}
}

// flagName is the flag KCM calls name as o's user types it: "--" and
// the name, with o's prefix unless the flag is process-wide.
func (o Options) flagName(name string) string { return o.renamer().Name(name) }

// renameErr is err with its message in o's flag names. It unwraps to err,
// so errors.Is and errors.As see what they saw before.
func (o Options) renameErr(err error) error { return o.renamer().Err(err) }

// renameLog returns l writing every message, string value and error in
// o's flag names; l itself when o has no prefix.
func (o Options) renameLog(l logr.Logger) logr.Logger { return o.renamer().Logger(l) }
