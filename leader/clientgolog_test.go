package leader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

func TestClientGoLoggerQuietsCanceled(t *testing.T) {
	var lines []string
	base := funcr.New(
		func(prefix, args string) { lines = append(lines, args) },
		funcr.Options{Verbosity: 1},
	)
	l := clientGoLogger(base).WithValues("lock", "ns/name")
	l.Error(
		fmt.Errorf("creating lease: %w", context.Canceled),
		"Error initially creating lease lock",
	)
	l.Error(errors.New("forbidden"), "Error retrieving lease lock")
	if len(lines) != 2 {
		t.Fatalf("lines = %q", lines)
	}
	if strings.Contains(lines[0], `"error"`) || !strings.Contains(lines[0], `"level"=1`) ||
		!strings.Contains(lines[0], "context canceled") {
		t.Errorf("a canceled request should be a V(1) info line: %s", lines[0])
	}
	if !strings.Contains(lines[1], `"error"="forbidden"`) ||
		!strings.Contains(lines[1], `"lock"="ns/name"`) {
		t.Errorf("other errors stay errors: %s", lines[1])
	}
}

// client-go adds "lock" to some messages; the logger already carries it.
func TestClientGoLoggerNoDuplicateLockKey(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 1}).
		WithValues("lock", "ns/name")
	l := clientGoLogger(base)
	l.Error(errors.New("injected"), "Failed to update lease", "lock", "ns/name")
	l.Info("attempting to acquire leader lease", "lock", "ns/name", "identity", "a")
	if len(lines) != 2 {
		t.Fatalf("lines = %q", lines)
	}
	for _, line := range lines {
		if n := strings.Count(line, `"lock"=`); n != 1 {
			t.Errorf("%d lock keys in %s, want 1", n, line)
		}
	}
	if !strings.Contains(lines[1], `"identity"="a"`) {
		t.Errorf("other keys dropped: %s", lines[1])
	}
}

// TestClientGoLoggerOfZeroLogger: an Elector built with the zero
// logr.Logger (no sink) runs; wrapping it used to panic in logr.New.
func TestClientGoLoggerOfZeroLogger(t *testing.T) {
	l := clientGoLogger(logr.Logger{})
	l.Info("dropped")
	l.Error(context.Canceled, "dropped")
	l.V(1).WithValues("k", "v").WithName("n").Info("dropped")
}
