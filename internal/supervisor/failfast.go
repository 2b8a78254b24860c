package supervisor

import (
	"context"
	"errors"
	"sync"
)

// FailFast runs functions side by side until the first of them fails, which
// cancels the others (through the cancel func it was made with); Wait
// returns every error joined. It is how one Run hosts several terms: when
// one ends with an error, all stop.
type FailFast struct {
	wg     sync.WaitGroup
	cancel context.CancelFunc
	mu     sync.Mutex
	errs   []error
}

// NewFailFast returns a FailFast that calls cancel on the first error;
// cancel should end the contexts the functions run under.
func NewFailFast(cancel context.CancelFunc) *FailFast { return &FailFast{cancel: cancel} }

// Go runs f(ctx) on its own goroutine.
func (g *FailFast) Go(ctx context.Context, f func(context.Context) error) {
	g.wg.Go(func() {
		if err := f(ctx); err != nil {
			g.mu.Lock()
			g.errs = append(g.errs, err)
			g.mu.Unlock()
			g.cancel()
		}
	})
}

// Wait waits for every function and returns their errors joined.
func (g *FailFast) Wait() error {
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.Join(g.errs...)
}
