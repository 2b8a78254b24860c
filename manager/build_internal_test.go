package manager

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
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
			got := m.restConfig
			if got.QPS != tc.wantQPS || got.Burst != tc.wantBurst || got.ContentType != tc.wantType || got.UserAgent != tc.wantAgent {
				t.Errorf("REST config: QPS %v Burst %d ContentType %q UserAgent %q, want %v %d %q %q",
					got.QPS, got.Burst, got.ContentType, got.UserAgent, tc.wantQPS, tc.wantBurst, tc.wantType, tc.wantAgent)
			}
			cc, err := clientBuilder{m: m}.Config("a-controller")
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.wantAgent + "/a-controller"; cc.UserAgent != want || cc.QPS != tc.wantQPS {
				t.Errorf("controller config: UserAgent %q QPS %v, want %q %v", cc.UserAgent, cc.QPS, want, tc.wantQPS)
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
	if o := m.Options(); o.LeaderElect || m.elector != nil || o.ControllerShutdownTimeout != DefaultControllerShutdownTimeout {
		t.Errorf("options without WithOptions: LeaderElect %v, elector %v, shutdown %v", o.LeaderElect, m.elector, o.ControllerShutdownTimeout)
	}
	m, err = NewBuilder("my-manager").WithRESTConfig(&rest.Config{Host: "https://127.0.0.1:1"}).
		WithLogger(logr.Discard()).WithOptions(NewOptions()).Build()
	if err != nil {
		t.Fatal(err)
	}
	if !m.Options().LeaderElect || m.elector == nil {
		t.Error("WithOptions(NewOptions()) does not elect")
	}
}

// A serving error after start is reported once, by watch, which ends Run.
func TestServingFailureAfterStart(t *testing.T) {
	boom := errors.New("listener closed")
	s := &servingRun{addr: fakeAddr{}, cancel: func() {}, done: make(chan struct{}), log: logr.Discard()}
	s.err = boom
	close(s.done)
	if err := s.watch(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("watch = %v, want the serving error", err)
	}
	if err := s.stop(); err != nil {
		t.Errorf("stop after watch reported = %v, want nil (reported once)", err)
	}

	quiet := &servingRun{addr: fakeAddr{}, cancel: func() {}, done: make(chan struct{}), log: logr.Discard()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := quiet.watch(ctx); err != nil {
		t.Errorf("watch after ctx done = %v", err)
	}
	quiet.err = boom
	close(quiet.done)
	if err := quiet.stop(); !errors.Is(err, boom) || !strings.Contains(err.Error(), "listener closed") {
		t.Errorf("stop = %v, want the serving error", err)
	}
}

type fakeAddr struct{}

func (fakeAddr) Network() string { return "tcp" }
func (fakeAddr) String() string  { return "127.0.0.1:1" }

// Two zero-Options Managers never collide on a port: the zero Options serve
// nothing, as --secure-port=0 does; NewOptions serves on KCM's 10257.
func TestZeroOptionsDoNotServe(t *testing.T) {
	m, err := NewBuilder("quiet").WithRESTConfig(&rest.Config{Host: "https://127.0.0.1:1"}).WithLogger(logr.Discard()).Build()
	if err != nil {
		t.Fatal(err)
	}
	if m.Options().Serving.Enabled() {
		t.Errorf("zero Options serve on %d", m.Options().Serving.SecurePort)
	}
	if p := NewOptions().Serving.SecurePort; p != 10257 {
		t.Errorf("NewOptions().Serving.SecurePort = %d, want 10257", p)
	}
}
