package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/ctrlhost/ctrlhost/cloud/cloudtest"
)

func TestMain(m *testing.M) {
	cloudtest.Register()
	goleak.VerifyTestMain(m)
}

func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cloud.yaml")
	if err := os.WriteFile(cfg, []byte("stateFile: "+filepath.Join(dir, "state.json")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help lists CCM's flags", []string{"--help"}, 0, "--node-monitor-period"},
		{"help lists the cloud flags", []string{"--help"}, 0, "--cloud-config"},
		{"secure port is CCM's", []string{"--help"}, 0, "10258"},
		{"no provider", []string{"--kubeconfig=/nonexistent"}, 1, "--cloud-provider: required"},
		{"external is KCM's", []string{"--cloud-provider=external", "--kubeconfig=/nonexistent"}, 1, `"external" is for kube-controller-manager`},
		{"unregistered provider", []string{"--cloud-provider=aws", "--kubeconfig=/nonexistent"}, 1, "--cloud-provider=aws: no cloud provider is registered"},
		{"provider needs its config", []string{"--cloud-provider=fake", "--kubeconfig=/nonexistent"}, 1, "--cloud-config is required"},
		{"bad period", []string{"--node-monitor-period=0s"}, 2, "--node-monitor-period: must be a positive duration"},
		{"unknown flag", []string{"--concurrent-deployment-syncs=5"}, 2, "unknown flag: --concurrent-deployment-syncs"},
		{"unknown controller", []string{"--controllers=*,nope", "--cloud-provider=fake", "--cloud-config=" + cfg, "--kubeconfig=/nonexistent"}, 1, `"nope" is not a known controller`},
		// Everything accepted: Build fails on the missing kubeconfig only.
		{"aliases and migration", []string{"--controllers=cloud-node,route,service,cloud-node-lifecycle", "--enable-leader-migration",
			"--cloud-provider=fake", "--cloud-config=" + cfg, "--cluster-cidr=10.244.0.0/16", "--kubeconfig=/nonexistent/kubeconfig"}, 1, "/nonexistent/kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			code := run(context.Background(), tt.args, &out)
			if code != tt.code || !strings.Contains(out.String(), tt.want) {
				t.Fatalf("run(%v) = %d\n%s\nwant %d and %q", tt.args, code, out.String(), tt.code, tt.want)
			}
		})
	}
}

// TestAcceptsUpstreamMigrationFiles: upstream's default configuration, its
// walkthrough's files and the KEP's example are accepted, with what each
// means for the CCM logged, and the manager runs (a context already
// cancelled, against an API server it never calls).
func TestAcceptsUpstreamMigrationFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cloud.yaml")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	for path, content := range map[string]string{
		cfg: "stateFile: " + filepath.Join(dir, "state.json") + "\n",
		kubeconfig: `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`,
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for file, want := range map[string]string{
		"default.yaml":              `no controller of this component is named "route-controller" (controllerLeaders[0]), "service-controller" (controllerLeaders[1])`,
		"walkthrough-kcm.yaml":      "not seeking the migration lock",
		"walkthrough-ccm.yaml":      "", // nothing to warn about
		"walkthrough-wildcard.yaml": "",
		"kep-example.yaml":          `the migration lock is the Lease "1-20-kcm-to-1-21-ccm"`,
	} {
		t.Run(file, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var out strings.Builder
			args := []string{"--kubeconfig=" + kubeconfig, "--secure-port=0", "--cloud-provider=fake", "--cloud-config=" + cfg,
				"--cluster-cidr=10.244.0.0/16", "--enable-leader-migration", "--logging-format=json",
				"--leader-migration-config=" + filepath.Join("..", "..", "..", "leader", "testdata", "upstream", file)}
			code := run(ctx, args, &out)
			log := strings.ReplaceAll(out.String(), `\"`, `"`)
			switch {
			case code != 0:
				t.Fatalf("run = %d, want 0:\n%s", code, log)
			case want == "" && strings.Contains(log, "Warning"):
				t.Fatalf("unexpected warning:\n%s", log)
			case want != "" && !strings.Contains(log, want):
				t.Fatalf("the log lacks %q:\n%s", want, log)
			}
		})
	}
}
