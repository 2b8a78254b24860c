package healthz_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/ctrlhost/ctrlhost/healthz"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var errBroken = errors.New("broken")

func fail(*http.Request) error { return errBroken }

// newHandler builds a Handler with, on every endpoint, a passing check "a"
// and a check "b" that fails iff bFails.
func newHandler(t *testing.T, bFails bool) *healthz.Handler {
	t.Helper()
	b := healthz.Ping
	if bFails {
		b = fail
	}
	var reg healthz.Registry
	all := []healthz.Endpoint{
		healthz.EndpointHealthz,
		healthz.EndpointLivez,
		healthz.EndpointReadyz,
	}
	reg.Add(healthz.Check{Name: "a", Checker: healthz.Ping}, all...)
	reg.Add(healthz.Check{Name: "b", Checker: b}, all...)
	h, err := reg.Handler()
	if err != nil {
		t.Fatalf("Handler() error = %v", err)
	}
	return h
}

func serve(h http.Handler, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func checkResponse(t *testing.T, rec *httptest.ResponseRecorder, wantCode int, wantBody string) {
	t.Helper()
	if rec.Code != wantCode {
		t.Errorf("status = %d, want %d", rec.Code, wantCode)
	}
	if got := rec.Body.String(); got != wantBody {
		t.Errorf("body = %q, want %q", got, wantBody)
	}
	for k, want := range map[string]string{
		"Content-Type":           "text/plain; charset=utf-8",
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "no-store",
	} {
		if got := rec.Header().Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
}

func TestServeEndpoints(t *testing.T) {
	for _, ep := range []string{"healthz", "livez", "readyz"} {
		tests := []struct {
			name     string
			bFails   bool
			query    string
			wantCode int
			wantBody string
		}{
			{"ok", false, "", 200, "ok"},
			{"ok verbose", false, "?verbose", 200, "[+]a ok\n[+]b ok\n" + ep + " check passed\n"},
			{
				"ok verbose=true",
				false,
				"?verbose=true",
				200,
				"[+]a ok\n[+]b ok\n" + ep + " check passed\n",
			},
			{
				"failed withholds reason",
				true,
				"",
				500,
				"[+]a ok\n[-]b failed: reason withheld\n" + ep + " check failed\n",
			},
			{
				"failed verbose shows error",
				true,
				"?verbose",
				500,
				"[+]a ok\n[-]b failed: broken\n" + ep + " check failed\n",
			},
			{"exclude failing check", true, "?exclude=b", 200, "ok"},
			{
				"exclude verbose",
				true,
				"?exclude=b&verbose",
				200,
				"[+]a ok\n[+]b excluded: ok\n" + ep + " check passed\n",
			},
			{
				"exclude both",
				true,
				"?exclude=a&exclude=b&verbose=1",
				200,
				"[+]a excluded: ok\n[+]b excluded: ok\n" + ep + " check passed\n",
			},
			{"exclude unknown", false, "?exclude=x", 200, "ok"},
			{
				"exclude unknown verbose",
				false,
				"?exclude=y&exclude=x&exclude=a&exclude=x&verbose",
				200,
				"[+]a excluded: ok\n[+]b ok\nwarn: some health checks cannot be excluded: no matches for \"x\",\"y\"\n" + ep + " check passed\n",
			},
			{"exclude unknown while failing", true, "?exclude=x", 500,
				"[+]a ok\n[-]b failed: reason withheld\nwarn: some health checks cannot be excluded: no matches for \"x\"\n" + ep + " check failed\n"},
			{"sub-path ok", false, "/a", 200, "ok"},
			{"sub-path failed", true, "/b", 500, "internal server error: broken\n"},
			{"sub-path of passing check while another fails", true, "/a", 200, "ok"},
			{"sub-path unknown", false, "/c", 404, "404 page not found\n"},
			{"sub-path empty", false, "/", 404, "404 page not found\n"},
			{"sub-path nested", false, "/a/b", 404, "404 page not found\n"},
		}
		for _, tt := range tests {
			t.Run(ep+"/"+tt.name, func(t *testing.T) {
				h := newHandler(t, tt.bFails)
				checkResponse(
					t,
					serve(h, http.MethodGet, "/"+ep+tt.query),
					tt.wantCode,
					tt.wantBody,
				)
			})
		}
	}
}

func TestServeMethodsAndPaths(t *testing.T) {
	tests := []struct {
		name      string
		method    string
		target    string
		wantCode  int
		wantBody  string
		wantAllow string
	}{
		{"HEAD ok", http.MethodHead, "/readyz", 200, "", ""},
		{"HEAD sub-path", http.MethodHead, "/readyz/a", 200, "", ""},
		{"POST", http.MethodPost, "/readyz", 405, "405 method not allowed\n", "GET, HEAD"},
		{"PUT sub-path", http.MethodPut, "/livez/a", 405, "405 method not allowed\n", "GET, HEAD"},
		{"DELETE unknown path", http.MethodDelete, "/metrics", 404, "404 page not found\n", ""},
		{"root", http.MethodGet, "/", 404, "404 page not found\n", ""},
		{"unknown", http.MethodGet, "/healthzz", 404, "404 page not found\n", ""},
		{"trailing slash", http.MethodGet, "/livez/", 404, "404 page not found\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serve(newHandler(t, false), tt.method, tt.target)
			checkResponse(t, rec, tt.wantCode, tt.wantBody)
			if got := rec.Header().Get("Allow"); got != tt.wantAllow {
				t.Errorf("Allow = %q, want %q", got, tt.wantAllow)
			}
		})
	}
}

func TestHEADFailing(t *testing.T) {
	rec := serve(newHandler(t, true), http.MethodHead, "/healthz")
	checkResponse(t, rec, 500, "")
	get := "[+]a ok\n[-]b failed: reason withheld\nhealthz check failed\n"
	if got, want := rec.Header().Get("Content-Length"), strconv.Itoa(len(get)); got != want {
		t.Errorf("Content-Length = %q, want %q (length of the GET body)", got, want)
	}
}

func TestNoChecksServesPing(t *testing.T) {
	var reg healthz.Registry
	reg.Add(healthz.Check{Name: "leader", Checker: fail}, healthz.EndpointReadyz)
	h, err := reg.Handler()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target   string
		wantCode int
		wantBody string
	}{
		{"/healthz", 200, "ok"},
		{"/livez?verbose", 200, "[+]ping ok\nlivez check passed\n"},
		{"/livez/ping", 200, "ok"},
		{"/readyz", 500, "[-]leader failed: reason withheld\nreadyz check failed\n"},
		{"/readyz/ping", 404, "404 page not found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			checkResponse(t, serve(h, http.MethodGet, tt.target), tt.wantCode, tt.wantBody)
		})
	}

	var empty healthz.Registry
	h, err = empty.Handler()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/healthz",
		"/healthz/ping",
		"/livez",
		"/livez/ping",
		"/readyz",
		"/readyz/ping",
	}
	if got := h.Paths(); !slices.Equal(got, want) {
		t.Errorf("Paths() = %q, want %q", got, want)
	}
}

func TestPanickingChecker(t *testing.T) {
	var reg healthz.Registry
	reg.Add(healthz.Check{Name: "ok", Checker: healthz.Ping}, healthz.EndpointLivez)
	reg.Add(
		healthz.Check{Name: "boom", Checker: func(*http.Request) error { panic("kaboom") }},
		healthz.EndpointLivez,
	)
	reg.Add(
		healthz.Check{Name: "boom-err", Checker: func(*http.Request) error { panic(errBroken) }},
		healthz.EndpointLivez,
	)
	reg.Add(healthz.Check{Name: "after", Checker: healthz.Ping}, healthz.EndpointLivez)
	h, err := reg.Handler()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target   string
		wantCode int
		wantBody string
	}{
		{
			"/livez",
			500,
			"[+]ok ok\n[-]boom failed: reason withheld\n[-]boom-err failed: reason withheld\n[+]after ok\nlivez check failed\n",
		},
		{
			"/livez?verbose",
			500,
			"[+]ok ok\n[-]boom failed: panic: kaboom\n[-]boom-err failed: panic: broken\n[+]after ok\nlivez check failed\n",
		},
		{"/livez/boom", 500, "internal server error: panic: kaboom\n"},
		{"/livez?exclude=boom&exclude=boom-err", 200, "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			checkResponse(t, serve(h, http.MethodGet, tt.target), tt.wantCode, tt.wantBody)
		})
	}

	_, results := h.Check(healthz.EndpointLivez, nil)
	if !errors.Is(results[2].Err, errBroken) {
		t.Errorf("panic(error) result = %v, want it to wrap %v", results[2].Err, errBroken)
	}
}

// TestPanicAlwaysFails checks that a panicking Checker fails whatever it
// panics with, including values that would pass if returned (a Note).
func TestPanicAlwaysFails(t *testing.T) {
	tests := []struct {
		name  string
		value any
	}{
		{"note", healthz.Note("skipped")},
		{"error wrapping a note", fmt.Errorf("wrapped: %w", healthz.Note("skipped"))},
		{"join of notes", errors.Join(healthz.Note("a"), healthz.Note("b"))},
		{"error", errBroken},
		{"string", "kaboom"},
		{"int", 42},
		{"nil", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reg healthz.Registry
			reg.Add(healthz.Check{Name: "boom", Checker: func(*http.Request) error {
				panic(tt.value)
			}}, healthz.EndpointLivez)
			h, err := reg.Handler()
			if err != nil {
				t.Fatal(err)
			}
			checkResponse(t, serve(h, http.MethodGet, "/livez"), 500,
				"[-]boom failed: reason withheld\nlivez check failed\n")
			for target, want := range map[string]string{
				"/livez?verbose": "[-]boom failed: panic: ",
				"/livez/boom":    "internal server error: panic: ",
			} {
				rec := serve(h, http.MethodGet, target)
				if rec.Code != 500 || !strings.HasPrefix(rec.Body.String(), want) {
					t.Errorf("GET %s = %d %q, want 500 and %q...", target, rec.Code, rec.Body, want)
				}
			}
			ok, results := h.Check(healthz.EndpointLivez, nil)
			if ok || len(results) != 1 || healthz.Passed(results[0].Err) {
				t.Fatalf("Check = %v, %+v; want a failed check", ok, results)
			}
			var pnil *runtime.PanicNilError
			if tt.value == nil && !errors.As(results[0].Err, &pnil) {
				t.Errorf("panic(nil) result = %v, want it to wrap *runtime.PanicNilError",
					results[0].Err)
			}
		})
	}
}

func TestCheckerSeesRequest(t *testing.T) {
	type key struct{}
	var (
		mu   sync.Mutex
		seen []string
	)
	record := func(req *http.Request) error {
		mu.Lock()
		defer mu.Unlock()
		v, _ := req.Context().Value(key{}).(string)
		seen = append(seen, req.URL.Path+" "+v)
		return nil
	}
	var reg healthz.Registry
	reg.Add(healthz.Check{Name: "r", Checker: record}, healthz.EndpointReadyz)
	h, err := reg.Handler()
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"/readyz", "/readyz/r"} {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req = req.WithContext(context.WithValue(t.Context(), key{}, "v"))
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	want := []string{"/readyz v", "/readyz/r v"}
	if !slices.Equal(seen, want) {
		t.Errorf("checker saw %q, want %q", seen, want)
	}
}

func TestCheck(t *testing.T) {
	h := newHandler(t, true)
	tests := []struct {
		name        string
		ep          healthz.Endpoint
		req         *http.Request
		wantOK      bool
		wantResults []healthz.Result
	}{
		{
			"nil request",
			healthz.EndpointReadyz,
			nil,
			false,
			[]healthz.Result{{Name: "a"}, {Name: "b", Err: errBroken}},
		},
		{
			"exclude from request",
			healthz.EndpointLivez,
			httptest.NewRequest(http.MethodGet, "/livez?exclude=b", nil),
			true,
			[]healthz.Result{{Name: "a"}, {Name: "b", Excluded: true}},
		},
		{"unknown endpoint", healthz.Endpoint("metrics"), nil, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, results := h.Check(tt.ep, tt.req)
			if ok != tt.wantOK {
				t.Errorf("ok = %v, want %v", ok, tt.wantOK)
			}
			if !slices.EqualFunc(results, tt.wantResults, func(a, b healthz.Result) bool {
				return a.Name == b.Name && a.Excluded == b.Excluded && errors.Is(a.Err, b.Err) &&
					(a.Err == nil) == (b.Err == nil)
			}) {
				t.Errorf("results = %+v, want %+v", results, tt.wantResults)
			}
		})
	}
}

func TestRegistryErrors(t *testing.T) {
	var reg healthz.Registry
	reg.Add(
		healthz.Check{Name: "foo", Checker: healthz.Ping},
		healthz.EndpointReadyz,
		healthz.EndpointLivez,
	)
	reg.Add(healthz.Check{Name: "foo", Checker: healthz.Ping}, healthz.EndpointReadyz)
	reg.Add(healthz.Check{Name: "", Checker: healthz.Ping}, healthz.EndpointLivez)
	reg.Add(
		healthz.Check{Name: "nil", Checker: nil},
		healthz.EndpointHealthz,
		healthz.EndpointLivez,
	)
	reg.Add(healthz.Check{Name: "a/b", Checker: healthz.Ping}, healthz.EndpointHealthz)
	reg.Add(healthz.Check{Name: "a b", Checker: healthz.Ping}, healthz.EndpointHealthz)
	reg.Add(healthz.Check{Name: "tab\t", Checker: healthz.Ping}, healthz.EndpointHealthz)
	reg.Add(
		healthz.Check{Name: "thrice", Checker: healthz.Ping},
		healthz.EndpointLivez,
		healthz.EndpointLivez,
		healthz.EndpointLivez,
	)
	reg.Add(healthz.Check{Name: "nowhere", Checker: healthz.Ping})
	reg.Add(healthz.Check{Name: "odd", Checker: healthz.Ping}, healthz.Endpoint("metrics"))
	reg.Add(healthz.Check{}, healthz.EndpointReadyz)

	h, err := reg.Handler()
	if h != nil {
		t.Errorf("Handler() = %v, want nil on error", h)
	}
	if err == nil {
		t.Fatal("Handler() error = nil, want every problem")
	}
	// A nil Checker is said once per check, whatever its endpoints.
	want := []string{
		`healthz: check "nil" has a nil Checker (on /healthz, /livez)`,
		`healthz: check "nowhere" added with no endpoint`,
		`healthz: check "odd" added to unknown endpoint "metrics" (want "healthz", "livez" or "readyz")`,
		`healthz: check #11 added has a nil Checker (on /readyz)`,
		`healthz: check "a/b" on /healthz has an invalid name: it must not contain "/", whitespace or control characters`,
		`healthz: check "a b" on /healthz has an invalid name: it must not contain "/", whitespace or control characters`,
		`healthz: check "tab\t" on /healthz has an invalid name: it must not contain "/", whitespace or control characters`,
		`healthz: check #2 on /livez has an empty name`,
		`healthz: check "thrice" registered 3 times on /livez`,
		`healthz: check #3 on /readyz has an empty name`,
		`healthz: check "foo" registered twice on /readyz`,
	}
	if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, want) {
		t.Errorf(
			"Handler() error lines:\n%s\nwant:\n%s",
			strings.Join(got, "\n"),
			strings.Join(want, "\n"),
		)
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != len(want) {
		t.Errorf("Handler() error is not an errors.Join of %d errors", len(want))
	}
}

func TestHandlerImmutable(t *testing.T) {
	var reg healthz.Registry
	reg.Add(healthz.Check{Name: "a", Checker: healthz.Ping}, healthz.EndpointReadyz)
	h, err := reg.Handler()
	if err != nil {
		t.Fatal(err)
	}
	reg.Add(healthz.Check{Name: "late", Checker: fail}, healthz.EndpointReadyz)
	checkResponse(t, serve(h, http.MethodGet, "/readyz"), 200, "ok")
	checkResponse(t, serve(h, http.MethodGet, "/readyz/late"), 404, "404 page not found\n")

	h2, err := reg.Handler()
	if err != nil {
		t.Fatal(err)
	}
	checkResponse(
		t,
		serve(h2, http.MethodGet, "/readyz/late"),
		500,
		"internal server error: broken\n",
	)
}

func TestConcurrentUse(t *testing.T) {
	var reg healthz.Registry
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b", "c", "d"} {
		wg.Go(
			func() { reg.Add(healthz.Check{Name: name, Checker: healthz.Ping}, healthz.EndpointLivez) },
		)
	}
	wg.Wait()
	h, err := reg.Handler()
	if err != nil {
		t.Fatal(err)
	}
	for range 8 {
		wg.Go(func() {
			if rec := serve(h, http.MethodGet, "/livez?verbose"); rec.Code != 200 {
				t.Errorf("status = %d, want 200", rec.Code)
			}
			if ok, _ := h.Check(healthz.EndpointLivez, nil); !ok {
				t.Error("Check(livez) = false, want true")
			}
		})
	}
	wg.Wait()
}

func TestPaths(t *testing.T) {
	want := []string{
		"/healthz", "/healthz/a", "/healthz/b",
		"/livez", "/livez/a", "/livez/b",
		"/readyz", "/readyz/a", "/readyz/b",
	}
	h := newHandler(t, false)
	got := h.Paths()
	if !slices.Equal(got, want) {
		t.Errorf("Paths() = %q, want %q", got, want)
	}
	for _, p := range got {
		if rec := serve(h, http.MethodGet, p); rec.Code != 200 {
			t.Errorf("GET %s = %d, want 200", p, rec.Code)
		}
	}
}

// TestNotePasses: a Note is a passing result whose text only ?verbose shows.
func TestNotePasses(t *testing.T) {
	var reg healthz.Registry
	reg.Add(healthz.Check{Name: "skipped-thing", Checker: func(*http.Request) error {
		return fmt.Errorf("wrapped: %w", healthz.Note("skipped: feature gate X is disabled"))
	}}, healthz.EndpointReadyz)
	h, err := reg.Handler()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/readyz":               "ok",
		"/readyz?verbose":       "[+]skipped-thing ok: wrapped: skipped: feature gate X is disabled\nreadyz check passed",
		"/readyz/skipped-thing": "ok",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != want {
			t.Errorf("GET %s = %d %q, want 200 %q", path, rec.Code, rec.Body.String(), want)
		}
	}
	if ok, results := h.Check(healthz.EndpointReadyz, nil); !ok || len(results) != 1 {
		t.Errorf("Check = %v %+v", ok, results)
	}
}

func TestPassed(t *testing.T) {
	note := healthz.Note("skipped")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, true},
		{"note", note, true},
		{"wrapped note", fmt.Errorf("ctl: %w", note), true},
		{"error", errBroken, false},
		{"joined notes", errors.Join(note, healthz.Note("other")), true},
		{"note joined with a failure", errors.Join(note, errBroken), false},
		{"wrapped join with a failure", fmt.Errorf("ctl: %w", errors.Join(note, errBroken)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := healthz.Passed(tt.err); got != tt.want {
				t.Errorf("Passed(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestAll(t *testing.T) {
	note := func(*http.Request) error { return healthz.Note("warming up") }
	fail := func(*http.Request) error { return errBroken }
	tests := []struct {
		name     string
		checkers []healthz.Checker
		wantPass bool
		wantText string
	}{
		{"none", nil, true, ""},
		{"all nil-returning", []healthz.Checker{healthz.Ping, nil, healthz.Ping}, true, ""},
		{"a note", []healthz.Checker{healthz.Ping, note}, true, "warming up"},
		{"a note and a failure", []healthz.Checker{note, fail}, false, errBroken.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := healthz.All(tt.checkers...)(nil)
			if healthz.Passed(err) != tt.wantPass {
				t.Errorf("All(...) = %v, passed %v, want %v", err, healthz.Passed(err), tt.wantPass)
			}
			if got := fmt.Sprint(err); tt.wantText != "" && got != tt.wantText {
				t.Errorf("All(...) = %q, want %q", got, tt.wantText)
			}
			if tt.wantText == "" && err != nil {
				t.Errorf("All(...) = %v, want nil", err)
			}
		})
	}

	// On an endpoint, a note joined with a failure fails.
	reg := &healthz.Registry{}
	reg.Add(
		healthz.Check{Name: "combined", Checker: healthz.All(note, fail)},
		healthz.EndpointReadyz,
	)
	h, err := reg.Handler()
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := h.Check(healthz.EndpointReadyz, nil); ok {
		t.Error("readyz passed with a failing check joined to a note")
	}
}
