package manager

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/descriptor"
)

func nopInit(context.Context, descriptor.Context) (descriptor.Controller, error) { return nil, nil }

// The REST config Build derives clients from takes the Options' client
// settings where the given config leaves them zero, and keeps what it sets.
func TestBuildWithRESTConfigAppliesOptions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       rest.Config
		opts      Options
		wantQPS   float32
		wantBurst int
		wantType  string
		wantAgent string
	}{
		{
			name:      "zero config takes the options",
			cfg:       rest.Config{Host: "https://127.0.0.1:1"},
			opts:      Options{KubeAPIQPS: 7},
			wantQPS:   7,
			wantBurst: DefaultKubeAPIBurst,
			wantType:  DefaultKubeAPIContentType,
			wantAgent: "my-manager",
		},
		{
			name:      "config's own settings win",
			cfg:       rest.Config{Host: "https://127.0.0.1:1", QPS: 50, Burst: 60, ContentConfig: rest.ContentConfig{ContentType: "application/json"}, UserAgent: "custom"},
			opts:      Options{KubeAPIQPS: 7, KubeAPIBurst: 8},
			wantQPS:   50,
			wantBurst: 60,
			wantType:  "application/json",
			wantAgent: "custom",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			given := tc.cfg
			before := given.String()
			m, err := NewBuilder("my-manager").WithRESTConfig(&given).WithOptions(tc.opts).
				WithLogger(logr.Discard()).Register(descriptor.New("a-controller", nopInit)).Build()
			if err != nil {
				t.Fatal(err)
			}
			if given.String() != before {
				t.Error("Build modified the caller's REST config")
			}
			got := m.clients.RESTConfig
			if got.QPS != tc.wantQPS || got.Burst != tc.wantBurst || got.ContentType != tc.wantType || got.UserAgent != tc.wantAgent {
				t.Errorf("REST config: QPS %v Burst %d ContentType %q UserAgent %q, want %v %d %q %q",
					got.QPS, got.Burst, got.ContentType, got.UserAgent, tc.wantQPS, tc.wantBurst, tc.wantType, tc.wantAgent)
			}
		})
	}
}

// Without WithOptions, Build uses the zero Options: defaults, no election.
func TestBuildWithoutOptionsDoesNotElect(t *testing.T) {
	m, err := NewBuilder("my-manager").WithRESTConfig(&rest.Config{Host: "https://127.0.0.1:1"}).
		WithLogger(logr.Discard()).Build()
	if err != nil {
		t.Fatal(err)
	}
	if o := m.Options(); o.LeaderElect || m.locks.main.elector != nil || o.ControllerShutdownTimeout != DefaultControllerShutdownTimeout {
		t.Errorf("options without WithOptions: LeaderElect %v, elector %v, shutdown %v", o.LeaderElect, m.locks.main.elector, o.ControllerShutdownTimeout)
	}
	m, err = NewBuilder("my-manager").WithRESTConfig(&rest.Config{Host: "https://127.0.0.1:1"}).
		WithLogger(logr.Discard()).WithOptions(NewOptions()).Build()
	if err != nil {
		t.Fatal(err)
	}
	if !m.Options().LeaderElect || m.locks.main.elector == nil {
		t.Error("WithOptions(NewOptions()) does not elect")
	}
}

// TestShardClientBudgetsTheGroupsLeases: a shard group's Leases get a
// client of their own whose budget covers their renewals (at the default
// --kube-api-qps 20, sixteen slot Leases at a 2s retry would take most of
// it, and a leaving member's releases would queue behind each other).
func TestShardClientBudgetsTheGroupsLeases(t *testing.T) {
	m, err := NewBuilder("my-manager").WithRESTConfig(&rest.Config{Host: "https://127.0.0.1:1"}).
		WithOptions(NewOptions()).WithLogger(logr.Discard()).Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := m.opts.LeaderElection.WithDefaults("my-manager")
	cs, err := shardClient(planInput{opts: m.opts, client: m.clients.Client, restConfig: m.clients.RESTConfig}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rl := cs.(*kubernetes.Clientset).CoordinationV1().RESTClient().GetRateLimiter()
	// 17 Leases, 4 requests each per 2s retry period.
	if want := float32(4 * 17 / 2.0); rl.QPS() < want {
		t.Errorf("shard client QPS %v, want at least %v", rl.QPS(), want)
	}
}
