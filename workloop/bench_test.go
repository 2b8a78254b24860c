package workloop_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/ctrlhost/ctrlhost/workloop"
)

// BenchmarkItem is the work loop's cost per item: add a key, a worker takes
// it, calls a sync that does nothing, and forgets it. Two workers.
func BenchmarkItem(b *testing.B) {
	var done atomic.Int64
	all := make(chan struct{})
	want := int64(b.N)
	l := workloop.New("bench", func(context.Context, string) error {
		if done.Add(1) == want {
			close(all)
		}
		return nil
	}, workloop.Options{Workers: 2})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = l.Run(ctx)
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		l.Add(strconv.Itoa(i))
	}
	<-all
	b.StopTimer()
	cancel()
	<-stopped
}
