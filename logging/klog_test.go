package logging_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/ctrlhost/ctrlhost/logging"
)

func TestRouteKlog(t *testing.T) {
	l, buf := newLogger(t, logging.Options{Format: "json", Verbosity: 2})
	// klog's own output, to see it resume after restore.
	outer := klog.CaptureState()
	defer outer.Restore()
	var klogOut bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&klogOut)

	restore := logging.RouteKlog(l.WithName("klog"))

	klog.InfoS("structured", "key", "value")
	klog.Info("plain ", "message")
	klog.Infof("formatted %d", 42)
	klog.ErrorS(errors.New("boom"), "structured error")
	klog.Error("plain error")
	klog.V(2).InfoS("verbose 2")
	klog.V(3).InfoS("verbose 3")
	klog.FromContext(context.Background()).Info("contextual")
	klog.Background().V(3).Info("contextual verbose 3")
	restore()
	klog.InfoS("after restore")

	type want struct{ level, key, value string }
	wantEntries := map[string]want{
		"structured":       {"info", "key", "value"},
		"plain message":    {"info", "", ""},
		"formatted 42":     {"info", "", ""},
		"structured error": {"error", "err", "boom"},
		"plain error":      {"error", "", ""},
		"verbose 2":        {"info", "v", ""},
		"contextual":       {"info", "", ""},
	}
	got := map[string]map[string]any{}
	for _, e := range entries(t, buf) {
		got[e["msg"].(string)] = e
	}
	for msg, w := range wantEntries {
		e, ok := got[msg]
		if !ok {
			t.Errorf("%q not routed to the logger", msg)
			continue
		}
		if e["level"] != w.level {
			t.Errorf("%q: level = %v, want %s", msg, e["level"], w.level)
		}
		if e["logger"] != "klog" {
			t.Errorf("%q: logger = %v, want klog", msg, e["logger"])
		}
		if w.key != "" && w.value != "" && e[w.key] != w.value {
			t.Errorf("%q: %s = %v, want %s", msg, w.key, e[w.key], w.value)
		}
		if c, _ := e["caller"].(string); !strings.HasPrefix(c, "logging/klog_test.go:") {
			t.Errorf("%q: caller = %q, want logging/klog_test.go:<line>", msg, c)
		}
	}
	if e := got["verbose 2"]; e != nil && e["v"] != 2.0 {
		t.Errorf("verbose 2: v = %v, want 2", e["v"])
	}
	for _, msg := range []string{"verbose 3", "contextual verbose 3", "after restore"} {
		if _, ok := got[msg]; ok {
			t.Errorf("%q written, want it dropped", msg)
		}
	}
	if !strings.Contains(klogOut.String(), "after restore") {
		t.Errorf("after restore, klog's own output = %q, want the entry", klogOut.String())
	}
	if strings.Contains(klogOut.String(), "structured") {
		t.Errorf("while routed, klog also wrote its own output: %q", klogOut.String())
	}
	if klog.V(1).Enabled() {
		t.Error("klog verbosity not restored")
	}
}
