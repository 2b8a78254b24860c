package zpages_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/ctrlhost/ctrlhost/internal/zpages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(h http.Handler, accept string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func status() zpages.Status {
	return zpages.Status{Component: "kube-controller-manager",
		Start:         time.Now().Add(-(3*time.Hour + 4*time.Minute + 5*time.Second)),
		BinaryVersion: "v9.9.9",
		Paths: func() []string {
			return []string{"/healthz", "/healthz/", "/readyz", "/metrics", "/debug/controllers/",
				"/statusz", "/"}
		}}
}

// TestStatuszText: KCM's title, warning and fields in KCM's order, one of
// KCM's delimiters, the paths by first segment.
func TestStatuszText(t *testing.T) {
	for _, accept := range []string{"", "text/plain", "*/*", "text/html, */*;q=0.8"} {
		w := get(zpages.Statusz(status()), accept)
		ct := w.Header().Get("Content-Type")
		if w.Code != http.StatusOK || !strings.HasPrefix(ct, "text/plain") {
			t.Fatalf("Accept %q: %d %s", accept, w.Code, w.Header().Get("Content-Type"))
		}
		want := regexp.MustCompile(`^
kube-controller-manager statusz
Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility ` +
			`guarantees and is for debugging purposes only.

Started(:|: |=| ) \w{3} \w{3} +\d+ \d\d:\d\d:\d\d \w+ \d{4}
Up(:|: |=| ) 3 hr 04 min 0[5-9] sec
Go version(:|: |=| ) ` + regexp.QuoteMeta(runtime.Version()) + `
Binary version(:|: |=| ) v9\.9\.9

Paths(:|: |=| ) /debug /healthz /metrics /readyz /statusz
$`)
		if !want.MatchString(w.Body.String()) {
			t.Errorf("Accept %q: /statusz text:\n%q", accept, w.Body.String())
		}
	}
}

// TestStatuszStructured: the v1beta1 object as JSON; v1alpha1 with KCM's
// deprecation warning; anything else 406.
func TestStatuszStructured(t *testing.T) {
	h := zpages.Statusz(status())
	w := get(h, "application/json;as=Statusz;v=v1beta1;g=config.k8s.io")
	var got struct {
		Kind, APIVersion string
		Metadata         struct{ Name string }
		UptimeSeconds    int64
		GoVersion        string
		BinaryVersion    string
		Paths            []string
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	if got.Kind != "Statusz" || got.APIVersion != "config.k8s.io/v1beta1" ||
		got.Metadata.Name != "kube-controller-manager" || got.UptimeSeconds < 11045 ||
		got.GoVersion != runtime.Version() || got.BinaryVersion != "v9.9.9" || len(got.Paths) != 5 {
		t.Errorf("structured /statusz = %+v", got)
	}
	if w.Header().Get("Warning") != "" {
		t.Errorf("v1beta1 carries a Warning: %s", w.Header().Get("Warning"))
	}
	w = get(h, "application/json;as=Statusz;v=v1alpha1;g=config.k8s.io")
	if w.Code != http.StatusOK || !strings.Contains(w.Header().Get("Warning"),
		"This version of the statusz endpoint is deprecated") {
		t.Errorf("v1alpha1: %d, Warning %q", w.Code, w.Header().Get("Warning"))
	}
	for _, accept := range []string{"application/json",
		"application/json;as=Flagz;v=v1beta1;g=config.k8s.io", "application/yaml",
		"text/plain;as=Statusz"} {
		if w := get(h, accept); w.Code != http.StatusNotAcceptable ||
			!strings.Contains(w.Body.String(), "as=Statusz;v=v1beta1") {
			t.Errorf("Accept %q: %d %s, want 406 saying what is served", accept, w.Code, w.Body)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	rw := httptest.NewRecorder()
	h.ServeHTTP(rw, r)
	if rw.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", rw.Code)
	}
}

// TestFlagz: the flags as parsed, sorted, classified ones hidden; the
// structured object holds the same.
func TestFlagz(t *testing.T) {
	fs := pflag.NewFlagSet("kcm", pflag.ContinueOnError)
	fs.Int("concurrent-gc-syncs", 20, "")
	fs.String("kubeconfig", "", "")
	fs.String("secret", "", "")
	if err := fs.SetAnnotation("secret", "classified", []string{"true"}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--concurrent-gc-syncs=5", "--secret=hush"}); err != nil {
		t.Fatal(err)
	}
	h := zpages.Flagz("kube-controller-manager",
		func() map[string]string { return zpages.FlagValues(fs) })
	body := get(h, "").Body.String()
	want := regexp.MustCompile(`^
kube-controller-manager flagz
Warning: [^\n]+
concurrent-gc-syncs(:|: |=| )5
kubeconfig(:|: |=| )
secret(:|: |=| )CLASSIFIED
$`)
	if !want.MatchString(body) {
		t.Errorf("/flagz text:\n%q", body)
	}
	var got struct {
		Kind  string
		Flags map[string]string
	}
	w := get(h, "application/json;as=Flagz;v=v1beta1;g=config.k8s.io")
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "Flagz" || got.Flags["concurrent-gc-syncs"] != "5" ||
		got.Flags["secret"] != "CLASSIFIED" {
		t.Errorf("structured /flagz = %+v", got)
	}
}
