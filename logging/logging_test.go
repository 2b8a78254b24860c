package logging_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/logging"
)

// newLogger builds a logger writing into a buffer.
func newLogger(t *testing.T, o logging.Options) (logr.Logger, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	l, flush, err := logging.New(o, &buf)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	t.Cleanup(flush)
	return l, &buf
}

// entries parses JSON lines.
func entries(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(buf.String()) {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

func TestJSON(t *testing.T) {
	l, buf := newLogger(t, logging.Options{Format: "json"})
	l.WithName("deployment").WithName("sync").Info("Synced", "key", "ns/name", "count", 3)
	l.WithName("deployment").Error(errors.New("boom"), "Sync failed", "key", "ns/name")

	es := entries(t, buf)
	if len(es) != 2 {
		t.Fatalf("got %d entries, want 2:\n%s", len(es), buf)
	}
	tests := []struct {
		entry int
		key   string
		want  any
	}{
		{0, "msg", "Synced"},
		{0, "level", "info"},
		{0, "logger", "deployment.sync"},
		{0, "key", "ns/name"},
		{0, "count", 3.0},
		{0, "v", 0.0},
		{1, "msg", "Sync failed"},
		{1, "level", "error"},
		{1, "logger", "deployment"},
		{1, "err", "boom"},
	}
	for _, tt := range tests {
		if got := es[tt.entry][tt.key]; got != tt.want {
			t.Errorf("entry %d: %s = %#v, want %#v", tt.entry, tt.key, got, tt.want)
		}
	}
	for i, e := range es {
		if ts, ok := e["ts"].(float64); !ok || ts <= 0 {
			t.Errorf("entry %d: ts = %#v, want milliseconds since the epoch", i, e["ts"])
		}
		if c, _ := e["caller"].(string); !strings.HasPrefix(c, "logging/logging_test.go:") {
			t.Errorf("entry %d: caller = %q, want logging/logging_test.go:<line>", i, c)
		}
		if _, ok := e["stacktrace"]; ok {
			t.Errorf("entry %d has a stack trace", i)
		}
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		name string
		o    logging.Options
	}{
		{"explicit", logging.Options{Format: "text"}},
		{"zero value", logging.Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, buf := newLogger(t, tt.o)
			l.WithName("deployment").Info("Synced", "key", "ns/name")
			line := buf.String()
			for _, want := range []string{"\tINFO\t", "\tdeployment\t", "logging/logging_test.go:", "\tSynced\t", `{"key": "ns/name"}`} {
				if !strings.Contains(line, want) {
					t.Errorf("line %q lacks %q", line, want)
				}
			}
			if strings.HasPrefix(line, "{") {
				t.Errorf("text output looks like JSON: %q", line)
			}
			// ISO8601: 2006-01-02T15:04:05.000Z0700
			if len(line) < 11 || line[4] != '-' || line[10] != 'T' {
				t.Errorf("line %q does not start with an ISO8601 time", line)
			}
		})
	}
}

func TestVerbosity(t *testing.T) {
	tests := []struct {
		verbosity int
		shown     []string
		hidden    []string
	}{
		{0, []string{"v0"}, []string{"v1", "v2", "v3"}},
		{2, []string{"v0", "v1", "v2"}, []string{"v3"}},
		{1000, []string{"v0", "v1", "v2", "v3"}, nil},
	}
	for _, tt := range tests {
		t.Run("v="+strconv.Itoa(tt.verbosity), func(t *testing.T) {
			l, buf := newLogger(t, logging.Options{Format: "json", Verbosity: tt.verbosity})
			for i := range 4 {
				l.V(i).Info("v" + strconv.Itoa(i))
			}
			l.V(5).Error(errors.New("x"), "errors always show")
			got := map[string]bool{}
			for _, e := range entries(t, buf) {
				got[e["msg"].(string)] = true
			}
			for _, m := range append(tt.shown, "errors always show") {
				if !got[m] {
					t.Errorf("-v=%d: %q not written", tt.verbosity, m)
				}
			}
			for _, m := range tt.hidden {
				if got[m] {
					t.Errorf("-v=%d: %q written", tt.verbosity, m)
				}
			}
		})
	}
}

func TestNewInvalid(t *testing.T) {
	tests := []struct {
		name string
		o    logging.Options
		want []string
	}{
		{
			"format",
			logging.Options{Format: "xml"},
			[]string{"--logging-format", `"xml"`, `"text"`, `"json"`},
		},
		{"verbosity", logging.Options{Verbosity: -1}, []string{"-v", "negative"}},
		{
			"both",
			logging.Options{Format: "yaml", Verbosity: -2},
			[]string{"--logging-format", "-v"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verr := tt.o.Validate()
			_, flush, err := logging.New(tt.o, nil)
			flush()
			for _, e := range []error{verr, err} {
				if e == nil {
					t.Fatalf("want an error for %+v", tt.o)
				}
				for _, w := range tt.want {
					if !strings.Contains(e.Error(), w) {
						t.Errorf("error %q lacks %q", e, w)
					}
				}
			}
		})
	}
	if err := logging.NewOptions().Validate(); err != nil {
		t.Errorf("NewOptions().Validate() = %v", err)
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args    []string
		want    logging.Options
		wantErr string
	}{
		{nil, logging.Options{Format: "text"}, ""},
		{[]string{"--logging-format=json"}, logging.Options{Format: "json"}, ""},
		{[]string{"--log-format=json"}, logging.Options{Format: "json"}, ""},
		{
			[]string{"--log-format", "json", "--logging-format=text"},
			logging.Options{Format: "text"},
			"",
		},
		{[]string{"-v=3"}, logging.Options{Format: "text", Verbosity: 3}, ""},
		{[]string{"-v", "3"}, logging.Options{Format: "text", Verbosity: 3}, ""},
		{[]string{"-v3"}, logging.Options{Format: "text", Verbosity: 3}, ""},
		{[]string{"--v=3"}, logging.Options{Format: "text", Verbosity: 3}, ""},
		{[]string{"--logging-format=xml"}, logging.Options{}, `"xml"`},
		{[]string{"--v=x"}, logging.Options{}, "--v"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			o := logging.NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.SetOutput(&bytes.Buffer{})
			o.AddFlags(fs)
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf(
						"Parse(%q) = %v, want an error containing %q",
						tt.args,
						err,
						tt.wantErr,
					)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.args, err)
			}
			if o != tt.want {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.args, o, tt.want)
			}
		})
	}

	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o := logging.NewOptions()
	o.AddFlags(fs)
	if f := fs.Lookup("log-format"); f == nil || !f.Hidden {
		t.Error("--log-format should exist and be hidden")
	}
	if f := fs.Lookup("v"); f == nil || f.Shorthand != "v" {
		t.Error("--v should have shorthand -v")
	}
}
