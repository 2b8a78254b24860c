package queue

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoop(t *testing.T) {
	tests := []struct {
		name      string
		sync      func(calls int) error
		opts      Options
		wantCalls int
	}{
		{"success once", func(int) error { return nil }, Options{}, 1},
		{"retried until success", func(n int) error {
			if n < 3 {
				return errors.New("transient")
			}
			return nil
		}, Options{}, 3},
		{"permanent error not retried", func(int) error { return Permanent(errors.New("bad spec")) }, Options{}, 1},
		{"dropped after max retries", func(int) error { return errors.New("always") }, Options{MaxRetries: 2}, 3},
		{"panic recovered and retried", func(n int) error {
			if n == 1 {
				panic("boom")
			}
			return nil
		}, Options{}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			calls := 0
			done := make(chan struct{})
			var l *Loop[string]
			l = New("test", func(ctx context.Context, key string) error {
				mu.Lock()
				calls++
				n := calls
				mu.Unlock()
				err := tt.sync(n)
				if n == tt.wantCalls {
					close(done)
				}
				return err
			}, tt.opts)
			ctx, cancel := context.WithCancel(context.Background())
			l.Add("k")
			errCh := make(chan error, 1)
			go func() { errCh <- l.Run(ctx, 2) }()
			<-done
			// The key must now be gone from the queue for good: forgotten
			// after success, permanent error or too many retries.
			cancel()
			if err := <-errCh; err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if calls != tt.wantCalls {
				t.Errorf("sync called %d times, want %d", calls, tt.wantCalls)
			}
			if tt.wantCalls > 0 && l.queue.NumRequeues("k") != 0 && tt.name != "retried until success" {
				t.Errorf("key not forgotten: %d requeues", l.queue.NumRequeues("k"))
			}
		})
	}
}

func TestRunRejectsZeroWorkers(t *testing.T) {
	l := New("test", func(context.Context, string) error { return nil }, Options{})
	if err := l.Run(context.Background(), 0); err == nil {
		t.Fatal("Run accepted 0 workers")
	}
}

func TestRunAfterSync(t *testing.T) {
	t.Run("context done before the caches sync", func(t *testing.T) {
		called := false
		l := New("test", func(context.Context, string) error { called = true; return nil }, Options{})
		l.Add("k")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		never := func() bool { return false }
		if err := l.RunAfterSync(ctx, 1, never); err != nil {
			t.Fatalf("RunAfterSync: %v", err)
		}
		if !l.queue.ShuttingDown() {
			t.Error("queue not shut down")
		}
		if called {
			t.Error("a worker ran although the caches never synced")
		}
	})
	t.Run("caches synced: runs the workers until ctx is done", func(t *testing.T) {
		done := make(chan struct{})
		l := New("test", func(_ context.Context, key string) error {
			if key == "k" {
				close(done)
			}
			return nil
		}, Options{})
		l.Add("k")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		synced := func() bool { return true }
		errCh := make(chan error, 1)
		go func() { errCh <- l.RunAfterSync(ctx, 2, synced, synced) }()
		<-done
		cancel()
		if err := <-errCh; err != nil {
			t.Fatalf("RunAfterSync: %v", err)
		}
		if !l.queue.ShuttingDown() {
			t.Error("queue not shut down")
		}
	})
	t.Run("synced (no caches): Run rejects 0 workers", func(t *testing.T) {
		l := New("test", func(context.Context, string) error { return nil }, Options{})
		if err := l.RunAfterSync(context.Background(), 0); err == nil {
			t.Fatal("RunAfterSync accepted 0 workers")
		}
		if !l.queue.ShuttingDown() {
			t.Error("queue not shut down")
		}
	})
}
