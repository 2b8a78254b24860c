package logging

import (
	"io"
	"os"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a logger writing to w (os.Stderr when nil) in o's format,
// and a function that flushes buffered output; call it before the program
// exits. Writes to w are serialized, so w need not be safe for concurrent
// use. New changes no global state: in particular it neither replaces zap's
// global logger nor routes klog (see RouteKlog).
//
// The error, if any, is o.Validate()'s.
func New(o Options, w io.Writer) (logr.Logger, func(), error) {
	if err := o.Validate(); err != nil {
		return logr.Discard(), func() {}, err
	}
	if w == nil {
		w = os.Stderr
	}
	v := min(o.Verbosity, MaxVerbosity)

	enc := zapcore.EncoderConfig{
		TimeKey:        "ts",
		LevelKey:       "level",
		NameKey:        "logger",
		CallerKey:      "caller",
		MessageKey:     "msg",
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeDuration: zapcore.StringDurationEncoder,
		EncodeCaller:   zapcore.ShortCallerEncoder,
		EncodeName:     zapcore.FullNameEncoder,
	}
	var encoder zapcore.Encoder
	var zopts []zapr.Option
	switch o.Format {
	case FormatJSON:
		enc.EncodeTime = zapcore.EpochMillisTimeEncoder
		enc.EncodeLevel = levelEncoder(zapcore.LowercaseLevelEncoder)
		encoder = zapcore.NewJSONEncoder(enc)
		zopts = append(zopts, zapr.LogInfoLevel("v"))
	default:
		enc.EncodeTime = zapcore.ISO8601TimeEncoder
		enc.EncodeLevel = levelEncoder(zapcore.CapitalLevelEncoder)
		encoder = zapcore.NewConsoleEncoder(enc)
	}
	zopts = append(zopts, zapr.ErrorKey("err"))

	sink := zapcore.Lock(zapcore.AddSync(w))
	core := zapcore.NewCore(encoder, sink, zap.NewAtomicLevelAt(zapcore.Level(-v)))
	z := zap.New(core, zap.AddCaller(), zap.ErrorOutput(sink))
	flush := func() { _ = z.Sync() } // syncing a terminal or pipe may fail; nothing to do about it
	return zapr.NewLoggerWithOptions(z, zopts...), flush, nil
}

// levelEncoder renders the levels below info, which logr's V(n) entries
// use (V(n) is zap level -n), as info: logr has only info and error
// entries, and the verbosity is a separate field.
func levelEncoder(base zapcore.LevelEncoder) zapcore.LevelEncoder {
	return func(l zapcore.Level, pae zapcore.PrimitiveArrayEncoder) {
		base(max(l, zapcore.InfoLevel), pae)
	}
}

// ForProgram is what a program does first: New, then RouteKlog into the
// logger, so that client-go and upstream controllers log in the same format
// to the same place. done undoes the routing and flushes; defer it in main.
func ForProgram(o Options, w io.Writer) (l logr.Logger, done func(), err error) {
	l, flush, err := New(o, w)
	if err != nil {
		return logr.Discard(), func() {}, err
	}
	restore := RouteKlog(l)
	return l, func() { restore(); flush() }, nil
}
