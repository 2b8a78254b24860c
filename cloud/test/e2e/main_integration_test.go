//go:build integration

package e2e

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/ctrlhost/ctrlhost/testenv"
)

var shared testenv.Shared

// sharedEnv is the package's one etcd + kube-apiserver.
func sharedEnv(tb testing.TB) *testenv.Env {
	tb.Helper()
	return shared.Get(tb)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := shared.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the shared test environment: %v\n", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}
