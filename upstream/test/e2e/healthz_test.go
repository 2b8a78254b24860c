//go:build integration

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"

	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/upstream/kcm"
)

// TestHealthz: the drop-in's /healthz answers 200 without credentials, and
// /healthz?verbose passes a check for every controller it started — the
// ones --controllers selects whose feature gates are on, as a Manager built
// from the same descriptors and flag in this process reports.
func TestHealthz(t *testing.T) {
	t.Parallel()
	startKCM(t)
	timed(t)
	if expected.err != nil {
		t.Fatalf("listing the controllers the drop-in starts: %v", expected.err)
	}
	want := expected.names
	for _, name := range []string{names.BootstrapSignerController, names.TokenCleanerController, names.ServiceAccountTokenController} {
		if !slices.Contains(want, name) {
			t.Fatalf("%s is not among the controllers --controllers=%s starts: %v", name, strings.Join(selected, ","), want)
		}
	}

	// The serving certificate is generated in memory by the process;
	// what is under test here is the answer, not the certificate.
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	get := func(ctx context.Context, path string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, dropIn.health+path, nil)
		if err != nil {
			return 0, "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}

	eventually(t, waitTimeout, "/healthz to answer 200 ok", func(ctx context.Context) error {
		code, body, err := get(ctx, "/healthz")
		if err != nil {
			return err
		}
		if code != http.StatusOK || body != "ok" {
			return fmt.Errorf("%d %q", code, body)
		}
		return nil
	})
	code, body, err := get(t.Context(), "/healthz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		t.Fatalf("/healthz?verbose: %d\n%s", code, body)
	}
	lines := strings.Split(body, "\n")
	for _, name := range want {
		if !slices.Contains(lines, "[+]"+name+" ok") {
			t.Errorf("/healthz?verbose has no passing check for controller %s", name)
		}
	}
	if t.Failed() {
		t.Logf("/healthz?verbose:\n%s", body)
	} else {
		t.Logf("/healthz?verbose passes a check for each of the %d controllers started", len(want))
	}
}

// expected is what the drop-in starts under --controllers: the
// controllers a Manager over kcm.Descriptors neither disables nor skips.
// TestMain fills it before any test runs: Build installs client-go's
// process-wide metrics providers, which client-go requires to happen
// before any request is in flight.
var expected struct {
	names []string
	err   error
}

func startedControllers() ([]string, error) {
	o, err := kcm.NewOptions()
	if err != nil {
		return nil, err
	}
	cfg, err := o.Config(manager.NewOptions())
	if err != nil {
		return nil, err
	}
	descs, err := kcm.Descriptors(kcm.Config{Component: cfg})
	if err != nil {
		return nil, err
	}
	m, err := manager.NewBuilder("kube-controller-manager").
		WithLogger(logr.Discard()).
		WithClient(fake.NewClientset(), metadatafake.NewSimpleMetadataClient(runtime.NewScheme())).
		WithOptions(manager.Options{Controllers: kcm.AlwaysOn(selected)}).
		WithFeatureGate(utilfeature.DefaultMutableFeatureGate).
		Register(descs...).
		Build()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, st := range m.Controllers() {
		if st.Phase != manager.PhaseDisabled && st.Phase != manager.PhaseSkipped {
			names = append(names, st.Name)
		}
	}
	return names, nil
}
