package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandLine: KCM flags for the host and the built-ins parse; a flag
// ctrlhost does not implement is rejected, not ignored; bad values fail.
func TestCommandLine(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{
			"unknown KCM flag",
			[]string{"--attach-detach-reconcile-sync-period=1m"},
			2,
			"unknown flag: --attach-detach-reconcile-sync-period",
		},
		{
			"unknown controller",
			[]string{"--controllers=*,attach-detach-controller", "--kubeconfig=/nonexistent"},
			1,
			`"attach-detach-controller" is not a known controller`,
		},
		{
			"unknown controller: where to find it",
			[]string{"--controllers=*,attachdetach", "--kubeconfig=/nonexistent"},
			1,
			"Every kube-controller-manager controller is in the upstream module's drop-in binary, github.com/ctrlhost/ctrlhost/upstream/cmd/kube-controller-manager",
		},
		{
			"bad worker count",
			[]string{"--concurrent-replicaset-syncs=-1", "--kubeconfig=/nonexistent"},
			1,
			"--concurrent-replicaset-syncs",
		},
		{
			"bad duration",
			[]string{"--controller-shutdown-timeout=0"},
			2,
			"must be a positive duration",
		},
		{"help", []string{"--help"}, 0, "--terminated-pod-gc-threshold"},
		// As KCM since v1.31: no in-tree provider; the message says what to do.
		{
			"in-tree cloud provider",
			[]string{"--cloud-provider=aws", "--kubeconfig=/nonexistent"},
			1,
			`--cloud-provider "aws": built-in cloud providers are disabled, as in kube-controller-manager since v1.31; set --cloud-provider=external and run a cloud-controller-manager for "aws"`,
		},
		// Upstream's default migration configuration names cloud
		// controllers this program does not have: accepted (a warning).
		{
			"default migration configuration",
			[]string{
				"--enable-leader-migration",
				"--cloud-provider=external",
				"--cloud-config=/etc/kubernetes/cloud.conf",
				"--kubeconfig=/nonexistent",
			},
			1,
			"/nonexistent",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			code := run(context.Background(), tt.args, &out)
			if code != tt.code || !strings.Contains(out.String(), tt.want) {
				t.Fatalf(
					"run(%v) = %d\n%s\nwant %d and %q",
					tt.args,
					code,
					out.String(),
					tt.code,
					tt.want,
				)
			}
		})
	}
}

// TestUpstreamCommandLineParses: a KCM command line limited to the flags
// of the controllers ctrlhost ships is accepted as is.
func TestUpstreamCommandLineParses(t *testing.T) {
	args := []string{
		"--kubeconfig=/nonexistent/kubeconfig", "--controllers=*,tokencleaner,-podgc", "--leader-elect=true",
		"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s",
		"--leader-elect-resource-lock=leases", "--leader-elect-resource-name=kube-controller-manager",
		"--leader-elect-resource-namespace=kube-system", "--secure-port=10257", "--bind-address=127.0.0.1",
		"--root-ca-file=/etc/kubernetes/pki/ca.crt", "--terminated-pod-gc-threshold=12500",
		"--concurrent-replicaset-syncs=5", "--concurrent-rc-syncs=5", "--concurrent-ttl-after-finished-syncs=5",
		"--concurrent-deployment-syncs=5", "--concurrent-daemonset-syncs=2", "--concurrent-job-syncs=5", "--concurrent-cron-job-syncs=5",
		"--service-account-private-key-file=/etc/kubernetes/pki/sa.key", "--concurrent-serviceaccount-token-syncs=5",
		"--concurrent-namespace-syncs=10", "--namespace-sync-period=5m", "--concurrent-resource-quota-syncs=5",
		"--resource-quota-sync-period=5m", "--concurrent-endpoint-syncs=5", "--endpoint-updates-batch-period=0s",
		"--concurrent-service-endpoint-syncs=5", "--max-endpoints-per-slice=100", "--endpointslice-updates-batch-period=0s",
		"--enable-garbage-collector=true", "--concurrent-gc-syncs=20",
		"--kube-api-qps=20", "--kube-api-burst=30", "--min-resync-period=12h", "--controller-shutdown-timeout=10s",
		"--use-service-account-credentials=true", "--v=2",
	}
	var out strings.Builder
	// Parsing succeeds; Build then fails only because the kubeconfig does
	// not exist, which proves every flag above was accepted.
	if code := run(context.Background(), args, &out); code != 1 ||
		!strings.Contains(out.String(), "/nonexistent/kubeconfig") {
		t.Fatalf("code %d:\n%s", code, out.String())
	}
}

// TestAcceptsUpstreamMigrationFiles: upstream's default configuration, its
// walkthrough's files and the KEP's example are accepted, each with the
// warnings a KCM owes its user, and the manager runs (here: a context
// already cancelled, against an unreachable API server it never calls).
func TestAcceptsUpstreamMigrationFiles(t *testing.T) {
	kubeconfig := unreachableKubeconfig(t)
	for file, warning := range map[string]string{
		"default.yaml":              `no controller of this component is named "route-controller"`,
		"walkthrough-kcm.yaml":      `no controller of this component is named "route"`,
		"walkthrough-ccm.yaml":      `no controller of this component is named "route"`,
		"walkthrough-wildcard.yaml": `no controller of this component is named "route"`,
		"kep-example.yaml":          `the migration lock is the Lease`,
	} {
		t.Run(file, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var out strings.Builder
			args := []string{
				"--kubeconfig=" + kubeconfig,
				"--secure-port=0",
				"--enable-leader-migration",
				"--leader-migration-config=" + filepath.Join(
					"..",
					"..",
					"leader",
					"testdata",
					"upstream",
					file,
				),
			}
			if code := run(ctx, args, &out); code != 0 ||
				!strings.Contains(strings.ReplaceAll(out.String(), `\"`, `"`), warning) {
				t.Fatalf(
					"run = %d, want 0 and a warning containing %q:\n%s",
					code,
					warning,
					out.String(),
				)
			}
		})
	}
}

// TestRefusesAnAPIServerOutsideKCMsSkew: against kube-apiserver 1.34 the
// program stops at start, saying why, instead of failing later in a
// controller that uses a 1.37 API.
func TestRefusesAnAPIServerOutsideKCMsSkew(t *testing.T) {
	for _, tc := range []struct {
		minor, git string
		code       int
		want       string
	}{
		{"34", "v1.34.4", 1, "kube-apiserver v1.34.4 is older than these controllers"},
		{"39", "v1.39.0", 1, "more than one minor newer"},
	} {
		t.Run(tc.git, func(t *testing.T) {
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter,
				r *http.Request) {
				if r.URL.Path != "/version" {
					http.NotFound(w, r)
					return
				}
				fmt.Fprintf(w, `{"major":"1","minor":%q,"gitVersion":%q}`, tc.minor, tc.git)
			}))
			defer server.Close()
			var out strings.Builder
			args := []string{"--kubeconfig=" + kubeconfigFor(t, server.URL), "--secure-port=0",
				"--leader-elect=false"}
			if code := run(context.Background(), args, &out); code != tc.code ||
				!strings.Contains(out.String(), tc.want) {
				t.Fatalf("run = %d, want %d and %q:\n%s", code, tc.code, tc.want, out.String())
			}
		})
	}
}

// unreachableKubeconfig is a valid kubeconfig for a server nothing listens
// on: Build accepts it, and a Run whose context is already done never
// calls it.
func unreachableKubeconfig(t *testing.T) string {
	return kubeconfigFor(t, "https://127.0.0.1:1")
}

// kubeconfigFor is a kubeconfig for the API server at url.
func kubeconfigFor(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	config := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + url + `"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
