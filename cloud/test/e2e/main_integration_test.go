//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/ctrlhost/ctrlhost/testenv"
)

var shared struct {
	once sync.Once
	env  *testenv.Env
	err  error
}

// sharedEnv starts one etcd + kube-apiserver for the package.
func sharedEnv(tb testing.TB) *testenv.Env {
	tb.Helper()
	shared.once.Do(func() { shared.env, shared.err = testenv.Start(context.Background(), testenv.Options{}) })
	if shared.err != nil {
		tb.Fatalf("starting the shared test environment: %v", shared.err)
	}
	return shared.env
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.env != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the shared test environment: %v\n", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}
