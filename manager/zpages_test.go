package manager_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

// TestZPages: every Manager serves /statusz and /flagz as KCM does; /flagz
// shows WithFlags' command line, or else the Manager's own options under
// their flag names.
func TestZPages(t *testing.T) {
	h := managertest.New(t, "zpage-manager", []descriptor.Descriptor{})
	h.Options.Controllers = []string{"*", "-nothing-controller"}
	h.Builder.WithVersion("v0.0.7")
	h.Builder.Register(descriptor.New("nothing-controller", nop))
	h.Start()
	code, body := h.Get("/statusz")
	for _, want := range []string{"zpage-manager statusz", "Binary version", "v0.0.7",
		"/flagz /healthz /livez /metrics /readyz /statusz"} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/statusz: %d, lacks %q:\n%s", code, want, body)
		}
	}
	code, body = h.Get("/flagz")
	for _, want := range []string{"zpage-manager flagz", "controllers", "*,-nothing-controller",
		"leader-elect"} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/flagz: %d, lacks %q:\n%s", code, want, body)
		}
	}

	fs := pflag.NewFlagSet("cmd", pflag.ContinueOnError)
	fs.String("my-flag", "given", "")
	g := managertest.New(t, "zpage-manager", nil)
	g.Builder.WithFlags(fs)
	g.Start()
	if _, body := g.Get("/flagz"); !strings.Contains(body, "my-flag") ||
		strings.Contains(body, "leader-elect") {
		t.Errorf("/flagz with WithFlags shows other flags than the given ones:\n%s", body)
	}
}
