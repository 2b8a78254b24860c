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
