package manager

import (
	"regexp"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
)

// How a Manager's messages name its flags. Options bound with
// AddManagerFlags(fs, "janitor-") remember the prefix: that Manager's
// user typed --janitor-controllers, and its Build errors, its warnings
// and its log lines say so, though the code that writes them (here, and
// in packages serving, leader and shard) knows the flags under KCM's
// names. Every such text goes through renameFlags, at the edge: Build's
// error, the Manager's logger, RunAll's error. Options bound otherwise,
// or filled in code, keep KCM's names.

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

// flagRef matches what may name a flag in a text: "--name", or a name
// on its own.
var flagRef = regexp.MustCompile(`(?:--)?[a-z0-9]+(?:-[a-z0-9]+)*`)

// renameFlags returns s with every Manager flag it names renamed with
// prefix: "--secure-port" becomes "--janitor-secure-port". With bare, a
// hyphenated flag name written without its dashes ("the client-ca-file",
// as some of KCM's help texts say) is renamed too; in messages it is
// not, since a value quoted there (a path) could hold one. Process-wide
// flags, words that are no flag, and parts of longer words are left
// alone.
func renameFlags(s, prefix string, bare bool) string {
	if prefix == "" || !strings.Contains(s, "-") || !bare && !strings.Contains(s, "--") {
		return s
	}
	names := managerFlagNames()
	var b strings.Builder
	last := 0
	for _, loc := range flagRef.FindAllStringIndex(s, -1) {
		i, j := loc[0], loc[1]
		name, dashed := strings.CutPrefix(s[i:j], "--")
		switch {
		case !names[name]:
			continue
		case i > 0 && isNameByte(s[i-1]), j < len(s) && isNameByte(s[j]):
			continue // part of a longer word
		case !dashed && (!bare || !strings.Contains(name, "-")):
			continue // an ordinary word ("profiling"), or a value
		}
		b.WriteString(s[last:i])
		if dashed {
			b.WriteString("--")
		}
		b.WriteString(prefix)
		b.WriteString(name)
		last = j
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' ||
		'0' <= c && c <= '9'
}

// flagName is the flag KCM calls name as o's user types it: "--" and
// the name, with o's prefix unless the flag is process-wide.
func (o Options) flagName(name string) string {
	return renameFlags("--"+name, o.flagPrefix, false)
}

// flagText is s, a message, with the flags it names renamed as o's user
// types them.
func (o Options) flagText(s string) string { return renameFlags(s, o.flagPrefix, false) }

// renameErr is err with its message in o's flag names (flagText). It
// unwraps to err, so errors.Is and errors.As see what they saw before.
func (o Options) renameErr(err error) error {
	if r := o.renamed(err); r != nil {
		return r
	}
	return err
}

// renamed is renameErr's error, or nil when err names none of o's flags.
func (o Options) renamed(err error) *renamedError {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if r := o.flagText(msg); r != msg {
		return &renamedError{msg: r, err: err}
	}
	return nil
}

// renamedError is an error whose message names flags as its Manager's
// user types them.
type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// renameLog returns l writing every message, string value and error in
// o's flag names (flagText); l itself when o has no prefix.
func (o Options) renameLog(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if o.flagPrefix == "" || sink == nil {
		return l
	}
	// The wrapper's methods are one more frame between the caller and
	// the sink, which was initialised by l already.
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1)
	}
	return logr.New(renamingSink{sink: sink, o: o}).V(l.GetV())
}

// renamingSink is renameLog's sink.
type renamingSink struct {
	sink logr.LogSink
	o    Options
}

var _ logr.CallDepthLogSink = renamingSink{}

func (s renamingSink) Init(logr.RuntimeInfo) {}

func (s renamingSink) Enabled(level int) bool { return s.sink.Enabled(level) }

func (s renamingSink) Info(level int, msg string, kvs ...any) {
	s.sink.Info(level, s.o.flagText(msg), s.values(kvs)...)
}

func (s renamingSink) Error(err error, msg string, kvs ...any) {
	s.sink.Error(s.o.renameErr(err), s.o.flagText(msg), s.values(kvs)...)
}

func (s renamingSink) WithValues(kvs ...any) logr.LogSink {
	return renamingSink{sink: s.sink.WithValues(s.values(kvs)...), o: s.o}
}

func (s renamingSink) WithName(name string) logr.LogSink {
	return renamingSink{sink: s.sink.WithName(name), o: s.o}
}

func (s renamingSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.sink.(logr.CallDepthLogSink); ok {
		return renamingSink{sink: cd.WithCallDepth(depth), o: s.o}
	}
	return s
}

// values renames the flags in kvs' string and error values; the keys are
// the code's own. kvs is the caller's: it is copied before a change.
func (s renamingSink) values(kvs []any) []any {
	out := kvs
	for i := 1; i < len(kvs); i += 2 {
		var v any
		switch x := kvs[i].(type) {
		case string:
			if r := s.o.flagText(x); r != x {
				v = r
			}
		case error:
			if r := s.o.renamed(x); r != nil {
				v = r
			}
		}
		if v == nil {
			continue
		}
		if len(out) > 0 && &out[0] == &kvs[0] {
			out = append([]any(nil), kvs...)
		}
		out[i] = v
	}
	return out
}
