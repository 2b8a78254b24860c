package serving

import (
	"context"
	"fmt"
	"net"
)

// Running is a Server serving in the background, from Start.
type Running struct {
	addr   net.Addr // nil when serving is disabled
	cancel context.CancelFunc
	done   chan struct{} // closed when serving ended; err is set then
	err    error
	// reported: Wait returned err already (Stop runs after Wait ended).
	reported bool
}

// Start binds the listener (so that a port in use fails before anything
// else starts) and serves in the background until Stop. Serving outlives
// ctx's cancellation but keeps its values. With serving disabled it returns
// a Running whose Addr is nil.
func (s *Server) Start(ctx context.Context) (*Running, error) {
	addr, err := s.Listen(ctx)
	if err != nil {
		return nil, err
	}
	r := &Running{addr: addr, cancel: func() {}, done: make(chan struct{})}
	if addr == nil {
		close(r.done)
		return r, nil
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	go func() {
		defer close(r.done)
		if err := s.Serve(sctx); err != nil {
			r.err = fmt.Errorf("serving on %s: %w", addr, err)
		} else if sctx.Err() == nil {
			r.err = fmt.Errorf("serving on %s: stopped unexpectedly", addr)
		}
	}()
	return r, nil
}

// Addr is the bound address; nil when serving is disabled.
func (r *Running) Addr() net.Addr { return r.addr }

// Wait returns the serving error if serving ends before ctx does, and nil
// once ctx is done. A caller that wants a serving failure to stop the
// program runs Wait beside its other work.
func (r *Running) Wait(ctx context.Context) error {
	if r.addr == nil {
		return nil
	}
	select {
	case <-r.done:
		r.reported = r.err != nil
		return r.err
	case <-ctx.Done():
		return nil
	}
}

// Stop ends serving, waits for it, and returns its error unless Wait
// already returned it.
func (r *Running) Stop() error {
	r.cancel()
	<-r.done
	if r.reported {
		return nil
	}
	return r.err
}
