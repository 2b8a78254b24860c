//go:build integration

package contract_test

import (
	"context"
	"testing"

	"github.com/ctrlhost/ctrlhost/test/integration/contract"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// TestContractKubeAPIServer runs the table against testenv's
// kube-apiserver.
func TestContractKubeAPIServer(t *testing.T) {
	env, err := testenv.Start(t.Context(), testenv.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	}()
	contract.Run(t, &contract.Target{
		Name:    "kube-apiserver " + testenv.KubernetesVersion,
		Config:  env.Config(),
		Restart: env.RestartAPIServer,
		Serve: func(ctx context.Context, r contract.CustomResource) error {
			return env.InstallCRDs(ctx, r.Definition())
		},
		Unserve: func(ctx context.Context, r contract.CustomResource) error {
			return env.UninstallCRDs(ctx, r.Plural+"."+r.Group)
		},
	})
}
