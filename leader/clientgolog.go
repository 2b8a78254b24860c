package leader

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
)

// clientGoLogger is the logger handed to client-go's LeaderElector. Sessions
// of a follower are restarted on purpose (to retry at once when the lease
// frees up), which cancels requests in flight; client-go reports those as
// errors ("Error initially creating lease lock: context canceled"). Such
// errors are expected here, so they are logged as V(1) info instead.
//
// The logger already carries the lock's name under "lock", and client-go
// adds its own "lock" to some messages; its copy is dropped so that no line
// has the key twice.
func clientGoLogger(l logr.Logger) logr.Logger {
	if l.GetSink() == nil {
		return logr.Discard() // the zero Logger: nothing to wrap
	}
	return logr.New(canceledSink{l.GetSink()})
}

type canceledSink struct{ logr.LogSink }

// withoutLock drops "lock" pairs from client-go's key/value list.
func withoutLock(kv []any) []any {
	out := kv[:0:0]
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok && k == "lock" {
			continue
		}
		out = append(out, kv[i], kv[i+1])
	}
	return out
}

func (s canceledSink) Info(level int, msg string, kv ...any) {
	s.LogSink.Info(level, msg, withoutLock(kv)...)
}

func (s canceledSink) Error(err error, msg string, kv ...any) {
	kv = withoutLock(kv)
	if errors.Is(err, context.Canceled) {
		if s.LogSink.Enabled(1) {
			s.LogSink.Info(1, msg, append(kv, "err", err.Error())...)
		}
		return
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s canceledSink) WithValues(kv ...any) logr.LogSink {
	return canceledSink{s.LogSink.WithValues(kv...)}
}

func (s canceledSink) WithName(name string) logr.LogSink {
	return canceledSink{s.LogSink.WithName(name)}
}
