package debugmux_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/internal/debugmux"
)

type page struct{ nilHandler bool }

func (page) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (p page) DebuggingHandler() http.Handler {
	if p.nilHandler {
		return nil
	}
	return http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "page at "+r.URL.Path) },
	)
}

func TestMux(t *testing.T) {
	plain := descriptor.ControllerFunc(func(ctx context.Context) error { return nil })
	running := map[string]descriptor.Controller{
		"with-page": page{},
		"plain":     plain,
		"nil-page":  page{nilHandler: true},
		"stopped":   nil,
	}
	h := debugmux.New(
		"/debug/controllers/",
		func() []string { return []string{"stopped", "with-page", "plain", "nil-page"} },
		func(name string) (descriptor.Controller, bool) { c, ok := running[name]; return c, ok },
	)
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/debug/controllers/with-page/", 200, "page at /"},
		{"/debug/controllers/with-page/queue", 200, "page at /queue"},
		{"/debug/controllers/plain/", 404, ""},
		{"/debug/controllers/nil-page/", 404, ""},
		{"/debug/controllers/stopped/", 503, `controller "stopped" is not running`},
		{"/debug/controllers/nobody/", 404, ""},
		{"/debug/controllers/", 200, "/debug/controllers/with-page/\n"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf(
				"GET %s = %d %q, want %d %q",
				tc.path,
				rec.Code,
				rec.Body.String(),
				tc.code,
				tc.body,
			)
		}
		if tc.path == "/debug/controllers/" &&
			rec.Body.String() != "/debug/controllers/with-page/\n" {
			t.Errorf("index = %q, want only the served page", rec.Body.String())
		}
	}
}
