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
func clientGoLogger(l logr.Logger) logr.Logger {
	return logr.New(canceledSink{l.GetSink()})
}

type canceledSink struct{ logr.LogSink }

func (s canceledSink) Error(err error, msg string, kv ...any) {
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
