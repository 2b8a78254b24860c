package testenv

import (
	"context"
	"sync"
	"testing"
)

// Shared is one Env for a test binary: started by the first test that
// asks for it, stopped by TestMain once every test has run. Tests that
// share it must keep out of each other's way (their own namespaces, object
// names and Lease names).
type Shared struct {
	// Options configure the Env; they are read by the first Get.
	Options Options

	once sync.Once
	env  *Env
	err  error
}

// Get returns the Env, starting it on the first call. If it could not
// start, Get fails tb, and every later caller with the same error.
func (s *Shared) Get(tb testing.TB) *Env {
	tb.Helper()
	s.once.Do(func() { s.env, s.err = Start(context.Background(), s.Options) })
	if s.err != nil {
		tb.Fatalf("starting the shared test environment: %v", s.err)
	}
	return s.env
}

// Stop stops the Env if Get started it; otherwise it does nothing. Call it
// from TestMain after m.Run.
func (s *Shared) Stop() error {
	if s.env == nil {
		return nil
	}
	return s.env.Stop()
}
