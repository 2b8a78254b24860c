// Package flagprefix renames flags in texts for a Manager whose flags carry
// a prefix: bound with AddManagerFlags(fs, "janitor-"), its user typed
// --janitor-controllers, and its errors, warnings and log lines must say
// so, though the code that writes them (the manager and the rooms it
// composes) knows the flags under KCM's names.
//
// Guarantees: only the names a Renamer is given are renamed, whole words
// only ("--secure-port" in "--secure-port=0", never "insecure-port");
// a renamed error unwraps to the original, so errors.Is and errors.As see
// what they saw before. Not guaranteed: a flag named in a value the
// message quotes (a path holding a hyphenated flag name) is renamed in
// help texts (Help), where such a name is the norm, and not elsewhere.
package flagprefix

import (
	"regexp"
	"strings"

	"github.com/go-logr/logr"
)

// Renamer renames the flags named by Names with Prefix. The zero Renamer,
// and one without a prefix, changes nothing.
type Renamer struct {
	Prefix string
	// Names returns the KCM names of the flags that take the prefix
	// (called only when there is one; process-wide flags are not in it).
	Names func() map[string]bool
}

// ref matches what may name a flag in a text: "--name", or a name on its
// own.
var ref = regexp.MustCompile(`(?:--)?[a-z0-9]+(?:-[a-z0-9]+)*`)

// Text returns s, a message, with every flag it names as "--name" renamed:
// "--secure-port" becomes "--janitor-secure-port".
func (r Renamer) Text(s string) string { return r.rename(s, false) }

// Help returns s, a help text, renamed as Text does, and also a
// hyphenated flag name written without its dashes ("the client-ca-file",
// as some of KCM's help texts say).
func (r Renamer) Help(s string) string { return r.rename(s, true) }

// Name is the flag KCM calls name as the user types it: "--" and the
// name, prefixed unless the flag is process-wide.
func (r Renamer) Name(name string) string { return r.Text("--" + name) }

func (r Renamer) rename(s string, bare bool) string {
	if r.Prefix == "" || !strings.Contains(s, "-") || !bare && !strings.Contains(s, "--") {
		return s
	}
	names := r.Names()
	var b strings.Builder
	last := 0
	for _, loc := range ref.FindAllStringIndex(s, -1) {
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
		b.WriteString(r.Prefix)
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

// Err is err with its message renamed (Text); it unwraps to err.
func (r Renamer) Err(err error) error {
	if e := r.renamed(err); e != nil {
		return e
	}
	return err
}

// renamed is Err's error, or nil when err names none of the flags.
func (r Renamer) renamed(err error) *renamedError {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if t := r.Text(msg); t != msg {
		return &renamedError{msg: t, err: err}
	}
	return nil
}

// renamedError is an error whose message names the flags as the user
// types them.
type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// Logger returns l writing every message, string value and error
// renamed (Text); l itself without a prefix.
func (r Renamer) Logger(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if r.Prefix == "" || sink == nil {
		return l
	}
	// The wrapper's methods are one more frame between the caller and
	// the sink, which was initialised by l already.
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1)
	}
	return logr.New(renamingSink{sink: sink, r: r}).V(l.GetV())
}

// renamingSink is Logger's sink.
type renamingSink struct {
	sink logr.LogSink
	r    Renamer
}

var _ logr.CallDepthLogSink = renamingSink{}

func (s renamingSink) Init(logr.RuntimeInfo) {}

func (s renamingSink) Enabled(level int) bool { return s.sink.Enabled(level) }

func (s renamingSink) Info(level int, msg string, kvs ...any) {
	s.sink.Info(level, s.r.Text(msg), s.values(kvs)...)
}

func (s renamingSink) Error(err error, msg string, kvs ...any) {
	s.sink.Error(s.r.Err(err), s.r.Text(msg), s.values(kvs)...)
}

func (s renamingSink) WithValues(kvs ...any) logr.LogSink {
	return renamingSink{sink: s.sink.WithValues(s.values(kvs)...), r: s.r}
}

func (s renamingSink) WithName(name string) logr.LogSink {
	return renamingSink{sink: s.sink.WithName(name), r: s.r}
}

func (s renamingSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.sink.(logr.CallDepthLogSink); ok {
		return renamingSink{sink: cd.WithCallDepth(depth), r: s.r}
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
			if t := s.r.Text(x); t != x {
				v = t
			}
		case error:
			if e := s.r.renamed(x); e != nil {
				v = e
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
