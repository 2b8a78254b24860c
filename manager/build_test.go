package manager_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/healthz"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
)

func nop(context.Context, descriptor.Context) (descriptor.Controller, error) { return nil, nil }

// TestBuildReportsEveryProblemAtOnce feeds Build many bad inputs together
// and checks that one error names every one of them, each once.
func TestBuildReportsEveryProblemAtOnce(t *testing.T) {
	_, err := manager.NewBuilder("").
		Register(
			descriptor.New("", nop),
			descriptor.New("dup-controller", nop),
			descriptor.New("dup-controller", nop),
			descriptor.New("nil-init-controller", nil),
			descriptor.New("x-controller", nop).WithAliases("x", "y-controller"),
			descriptor.New("y-controller", nop).WithAliases("x"),
			descriptor.New("gated-controller", nop).WithFeatureGates("NoSuchGate"),
			descriptor.New("ping", nop),
		).
		WithClient(fake.NewClientset(), nil).
		WithOptions(manager.Options{
			Controllers:               []string{"*", "-nope", "", "zip"},
			ControllerShutdownTimeout: -time.Second,
			MinResyncPeriod:           -time.Hour,
			ControllerStartInterval:   -time.Second,
			KubeAPIQPS:                -1,
			KubeAPIBurst:              -1,
			Serving:                   serving.Options{SecurePort: 70000},
		}).
		WithHealthCheck("my-check", nil).
		Build()
	if err == nil {
		t.Fatal("Build succeeded")
	}
	msg := err.Error()
	for _, want := range []string{
		"component: must not be empty",
		"descriptor #1: name \"\": must not be empty",
		`descriptor "dup-controller": registered twice`,
		`descriptor "nil-init-controller": InitFunc is nil`,
		`alias "y-controller" is the canonical name of a registered controller`,
		`alias "x" is already an alias of "x-controller"`,
		`--controllers: "nope", "zip" are not known controllers; known controllers: `,
		"--controllers: entry #3 is empty",
		"--controller-shutdown-timeout: must not be negative",
		"--min-resync-period: must not be negative",
		"--controller-start-interval: must not be negative",
		"--kube-api-qps: must be a finite number, zero or more",
		"--kube-api-burst: must not be negative",
		"--secure-port: 70000 is not a port",
		`check "my-check" has a nil Checker`,
	} {
		if n := strings.Count(msg, want); n != 1 {
			t.Errorf("Build error has %q %d times, want once", want, n)
		}
	}
	if n := strings.Count(msg, "known controllers: "); n != 1 {
		t.Errorf("Build error lists the known controllers %d times, want once", n)
	}
	if t.Failed() {
		t.Logf("Build error:\n%s", msg)
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name string
		b    *manager.Builder
		want string
	}{
		{"invalid component", manager.NewBuilder("Bad Name").WithClient(fake.NewClientset(), nil), `component "Bad Name": must be a lowercase DNS-1123 name`},
		{"feature gate not registered", manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).
			Register(descriptor.New("g", nop).WithFeatureGates("Unknown")), `controller "g": feature gate "Unknown"`},
		{"check name taken by a controller", manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).
			Register(descriptor.New("informer-sync", nop)), `check "informer-sync" registered twice on /readyz`},
		{"nil client", manager.NewBuilder("m").WithClient(nil, nil), "WithClient: the typed client must not be nil"},
		{"read of a field pods lack", manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).
			Register(descriptor.New("r", nop).WithReads(corev1.SchemeGroupVersion.WithResource("pods"),
				"spec.nodeName", "spec.node")),
			`descriptor "r": WithReads: /v1, Resource=pods: field path "spec.node" of Pod: ` +
				`PodSpec has no field "node" (it has activeDeadlineSeconds, affinity, `},
		{"unloadable kubeconfig", manager.NewBuilder("m").WithOptions(manager.Options{Kubeconfig: "/nonexistent/kubeconfig"}),
			`--kubeconfig "/nonexistent/kubeconfig"`},
		// Defect: NaN and +Inf were accepted and turned rate limiting off.
		{"QPS not a number", manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).
			WithOptions(manager.Options{KubeAPIQPS: float32(math.NaN())}), "--kube-api-qps: must be a finite number, zero or more, got NaN"},
		{"QPS infinite", manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).
			WithOptions(manager.Options{KubeAPIQPS: float32(math.Inf(1))}), "--kube-api-qps: must be a finite number, zero or more, got +Inf"},
		{"budget QPS not a number", manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).
			WithOptions(manager.Options{ClientBudgets: map[string]manager.ClientBudget{"c": {QPS: float32(math.NaN())}}}),
			`ClientBudgets["c"]: QPS must be a finite number`},
		// Defect: settings that leave no stop budget let two leaders act
		// together for most of a second.
		{"lease settings without a stop budget", manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).
			WithOptions(manager.Options{LeaderElect: true, LeaderElection: leader.Config{
				LeaseDuration: 2 * time.Second, RenewDeadline: 1900 * time.Millisecond, RetryPeriod: time.Second}}),
			"--leader-elect-lease-duration) must exceed RenewDeadline (--leader-elect-renew-deadline) + RetryPeriod (--leader-elect-retry-period)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.b.Build()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestRunTwiceIsAnError(t *testing.T) {
	m, err := manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).WithOptions(manager.Options{Serving: serving.Options{SecurePort: -1}}).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Run(ctx); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	if err := m.Run(ctx); err == nil || !strings.Contains(err.Error(), "Run called twice") {
		t.Fatalf("second Run: %v", err)
	}
}

func TestOptionsFlags(t *testing.T) {
	tests := []struct {
		args    []string
		check   func(manager.Options) bool
		wantErr string
	}{
		{nil, func(o manager.Options) bool {
			return len(o.Controllers) == 1 && o.Controllers[0] == "*" && o.ControllerShutdownTimeout == 10*time.Second &&
				o.MinResyncPeriod == 12*time.Hour && o.KubeAPIQPS == 20 && o.KubeAPIBurst == 30 &&
				o.Serving.SecurePort == 10257 && o.Serving.BindAddress == "127.0.0.1" && o.KubeAPIContentType == "application/vnd.kubernetes.protobuf"
		}, ""},
		{[]string{"--controllers=*,-foo,bar", "--kubeconfig=/k", "--master=https://m", "--kube-api-qps=50", "--kube-api-burst=100"},
			func(o manager.Options) bool {
				return strings.Join(o.Controllers, ",") == "*,-foo,bar" && o.Kubeconfig == "/k" && o.Master == "https://m" && o.KubeAPIQPS == 50 && o.KubeAPIBurst == 100
			}, ""},
		{[]string{"--secure-port=0"}, func(o manager.Options) bool { return o.Serving.SecurePort == 0 && !o.Serving.Enabled() }, ""},
		{[]string{"--secure-port=10300", "--bind-address=0.0.0.0"}, func(o manager.Options) bool {
			return o.Serving.SecurePort == 10300 && o.Serving.BindAddress == "0.0.0.0"
		}, ""},
		{[]string{"--controller-shutdown-timeout=3s", "--min-resync-period=1h", "--controller-start-interval=1s"}, func(o manager.Options) bool {
			return o.ControllerShutdownTimeout == 3*time.Second && o.MinResyncPeriod == time.Hour && o.ControllerStartInterval == time.Second
		}, ""},
		{[]string{"--controller-shutdown-timeout=0"}, nil, "must be a positive duration"},
		{[]string{"--min-resync-period=-1h"}, nil, "must be a positive duration"},
		{[]string{"--leader-elect-lease-duration=0s"}, nil, `invalid argument "0s" for "--leader-elect-lease-duration" flag: must be a positive duration`},
		{[]string{"--leader-elect-renew-deadline=-1s"}, nil, `"--leader-elect-renew-deadline" flag: must be a positive duration`},
		{[]string{"--leader-elect-retry-period=-2s"}, nil, `"--leader-elect-retry-period" flag: must be a positive duration`},
		{[]string{"--leader-elect-retry-period=soon"}, nil, `"--leader-elect-retry-period" flag`},
		{[]string{"--secure-port=99999"}, nil, "99999 is not a port"},
		{[]string{"--secure-port=abc"}, nil, "not a port number"},
		{[]string{"--not-a-flag"}, nil, "unknown flag: --not-a-flag"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			o := manager.NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.SetOutput(&strings.Builder{})
			o.AddFlags(fs)
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(o) {
				t.Errorf("options after parse: %+v", o)
			}
		})
	}
}

func TestWithHealthCheck(t *testing.T) {
	m, err := manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).
		WithHealthCheck("my-db", func(*http.Request) error { return errors.New("db down") }, healthz.EndpointReadyz).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/livez": 200, "/readyz/my-db": 500, "/livez/my-db": 404} {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("%s: %d, want %d", path, rec.Code, want)
		}
	}
}

func newFlagSet(o *manager.Options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	o.AddFlags(fs)
	return fs
}

// TestCloudProviderRule: as kube-controller-manager since v1.31, a named
// provider is an error telling to use "external", unless the program runs
// the provider in-process.
func TestCloudProviderRule(t *testing.T) {
	for _, tt := range []struct {
		provider  string
		inProcess bool
		want      string // "" means Build succeeds
	}{
		{"", false, ""},
		{"external", false, ""},
		{"aws", false, `--cloud-provider "aws": built-in cloud providers are disabled, as in kube-controller-manager since v1.31; set --cloud-provider=external and run a cloud-controller-manager for "aws"`},
		{"aws", true, ""},
		{"external", true, ""},
	} {
		b := manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).
			WithOptions(manager.Options{CloudProvider: tt.provider, CloudConfig: "/etc/cloud.conf"}).
			Register(descriptor.New("cloud-node-controller", nop).CloudProvider())
		if tt.inProcess {
			b.WithInProcessCloudProvider()
		}
		_, err := b.Build()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("--cloud-provider=%q in-process=%v: %v", tt.provider, tt.inProcess, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("--cloud-provider=%q in-process=%v: error %v, want %q", tt.provider, tt.inProcess, err, tt.want)
		}
	}
}
