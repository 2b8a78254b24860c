//go:build integration

// Package integration runs ctrlhost against a real kube-apiserver and etcd
// from package testenv. Build the binaries first with "make testbin"; these
// tests fail, rather than skip, when they are missing.
package integration

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/testenv"
)

// Users known to the shared Env.
const (
	// rbacUser has no bindings until a test grants it some.
	rbacUser = "rbac-user"
	// nobody never gets any bindings.
	nobody = "nobody"
)

// shared is one Env for the tests that do not need their own.
var shared = testenv.Shared{Options: testenv.Options{
	Users: []testenv.User{
		{Name: rbacUser, Groups: []string{"testers"}, UID: "uid-rbac"},
		{Name: nobody},
	},
}}

func sharedEnv(t testing.TB) *testenv.Env {
	t.Helper()
	return shared.Get(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := shared.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the shared test environment: %v\n", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines leaked: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runManager runs m until the test ends, then stops it and reports its
// error. The returned channel receives Run's error if it returns earlier.
func runManager(t testing.TB, m *manager.Manager) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	early := make(chan error, 1)
	go func() {
		err := m.Run(ctx)
		if ctx.Err() == nil {
			early <- err
		}
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager Run: %v", err)
		}
	})
	return early
}
