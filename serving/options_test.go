package serving

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestOptionsDefaults(t *testing.T) {
	o := NewOptions()
	if o.BindAddress != "127.0.0.1" || o.SecurePort != 10257 || o.DisableAuth || o.Profiling ||
		o.TokenCacheTTL != 10*time.Second || o.AuthorizedCacheTTL != 10*time.Second || o.UnauthorizedCacheTTL != 10*time.Second ||
		!slices.Equal(
			o.AlwaysAllowPaths,
			DefaultAlwaysAllowPaths,
		) || !slices.Equal(o.AlwaysAllowGroups, []string{"system:masters"}) ||
		o.ShutdownTimeout != 5*time.Second {
		t.Errorf("NewOptions() = %+v", o)
	}
	o.AlwaysAllowPaths[0] = "/changed"
	if DefaultAlwaysAllowPaths[0] != "/healthz" {
		t.Error("defaulting shares the default slice")
	}
	if got := (Options{AlwaysAllowPaths: []string{}}).WithDefaults().AlwaysAllowPaths; got == nil ||
		len(got) != 0 {
		t.Errorf("an empty AlwaysAllowPaths became %v, want it kept empty", got)
	}
}

// SecurePort, set in Go: zero is the default port, PortDisabled turns
// serving off, PortEphemeral asks the kernel, anything else outside
// 1-65535 is an error naming the flag and the Go values.
func TestSecurePortGo(t *testing.T) {
	for _, tc := range []struct {
		name        string
		port        int
		wantPort    int
		wantEnabled bool
		wantErr     string
	}{
		{"zero is off, as on the command line", 0, 0, false, ""},
		{"a port", 8443, 8443, true, ""},
		{"disabled", PortDisabled, PortDisabled, false, ""},
		{"ephemeral", PortEphemeral, PortEphemeral, true, ""},
		{"other negative", -5, -5, true, "--secure-port: -5 is not a port"},
		{"too large", 70000, 70000, true, "serving.PortDisabled or serving.PortEphemeral"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{SecurePort: tc.port}
			if got := o.WithDefaults().SecurePort; got != tc.wantPort {
				t.Errorf("WithDefaults().SecurePort = %d, want %d", got, tc.wantPort)
			}
			errs := o.Validate()
			if tc.wantErr == "" {
				if len(errs) > 0 {
					t.Fatalf("Validate: %v", errs)
				}
				if o.Enabled() != tc.wantEnabled {
					t.Errorf("Enabled() = %v, want %v", o.Enabled(), tc.wantEnabled)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr) {
				t.Errorf("Validate = %v, want one error containing %q", errs, tc.wantErr)
			}
		})
	}
}

// The flag spells "off" as 0, as in KCM and in Go, and shows PortDisabled that way.
func TestSecurePortFlag(t *testing.T) {
	o := Options{SecurePort: PortDisabled}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if got := fs.Lookup("secure-port").DefValue; got != "0" {
		t.Errorf("--secure-port default shown for PortDisabled = %q, want 0", got)
	}
	if err := fs.Parse([]string{"--secure-port=0"}); err != nil {
		t.Fatal(err)
	}
	if o.SecurePort != 0 || o.Enabled() {
		t.Errorf(
			"--secure-port=0: SecurePort = %d, Enabled %v; want 0, false",
			o.SecurePort,
			o.Enabled(),
		)
	}
	if err := fs.Parse([]string{"--secure-port=-2"}); err == nil {
		t.Error("--secure-port=-2 accepted; the flag has no ephemeral value")
	}
}

func TestOptionsFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		check   func(Options) bool
		wantErr string
	}{
		{name: "defaults", check: func(o Options) bool { return o.SecurePort == 10257 && o.BindAddress == "127.0.0.1" }},
		{name: "port 0 disables", args: []string{"--secure-port=0"}, check: func(o Options) bool { return o.SecurePort == 0 && !o.Enabled() }},
		{name: "port", args: []string{"--secure-port=1234", "--bind-address=0.0.0.0"},
			check: func(o Options) bool { return o.SecurePort == 1234 && o.BindAddress == "0.0.0.0" }},
		{name: "port out of range", args: []string{"--secure-port=70000"}, wantErr: "not a port"},
		{name: "ttl 0 disables the cache", args: []string{"--authentication-token-webhook-cache-ttl=0",
			"--authorization-webhook-cache-authorized-ttl=1m", "--authorization-webhook-cache-unauthorized-ttl=0s"},
			check: func(o Options) bool {
				return o.TokenCacheTTL < 0 && o.AuthorizedCacheTTL == time.Minute && o.UnauthorizedCacheTTL < 0
			}},
		{name: "negative ttl", args: []string{"--authentication-token-webhook-cache-ttl=-1s"}, wantErr: "must not be negative"},
		{name: "auth and profiling", args: []string{"--disable-serving-auth", "--profiling",
			"--authentication-kubeconfig=/a", "--authorization-kubeconfig=/b", "--authorization-always-allow-paths=/x,/y/*",
			"--tls-cert-file=/c", "--tls-private-key-file=/k"},
			check: func(o Options) bool {
				return o.DisableAuth && o.Profiling && o.AuthenticationKubeconfig == "/a" && o.AuthorizationKubeconfig == "/b" &&
					slices.Equal(o.AlwaysAllowPaths, []string{"/x", "/y/*"}) && o.CertFile == "/c" && o.KeyFile == "/k"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			err := fs.Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(o) {
				t.Errorf("parsed %v into %+v", tc.args, o)
			}
			if errs := o.Validate(); len(errs) > 0 {
				t.Errorf("Validate: %v", errs)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	errs := Options{
		BindAddress:      "localhost",
		SecurePort:       65536,
		CertFile:         "/only/cert",
		AlwaysAllowPaths: []string{"/a*b"},
		ShutdownTimeout:  -time.Second,
	}.Validate()
	var all []string
	for _, err := range errs {
		all = append(all, err.Error())
	}
	got := strings.Join(all, "\n")
	for _, want := range []string{
		`--bind-address: "localhost" is not an IP address`,
		"--secure-port: 65536 is not a port",
		"--tls-cert-file and --tls-private-key-file: set both or neither",
		`--authorization-always-allow-paths: "a*b": only a trailing * is allowed`,
		"ShutdownTimeout: must not be negative",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Validate errors:\n%s\nwant one containing %q", got, want)
		}
	}
	if len(errs) != 5 {
		t.Errorf("%d errors, want 5", len(errs))
	}
}
