package serving

import (
	"context"
	"errors"
	"testing"
)

type fakeAddr struct{}

func (fakeAddr) Network() string { return "tcp" }
func (fakeAddr) String() string  { return "127.0.0.1:1" }

// A serving error after start is reported once: by Wait, which lets the
// caller stop, and not again by Stop.
func TestServingFailureAfterStartIsReportedOnce(t *testing.T) {
	boom := errors.New("listener closed")
	r := &Running{addr: fakeAddr{}, cancel: func() {}, done: make(chan struct{}), err: boom}
	close(r.done)
	if err := r.Wait(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Wait = %v, want the serving error", err)
	}
	if err := r.Stop(); err != nil {
		t.Errorf("Stop after Wait reported it = %v, want nil", err)
	}

	quiet := &Running{addr: fakeAddr{}, cancel: func() {}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := quiet.Wait(ctx); err != nil {
		t.Errorf("Wait after ctx done = %v", err)
	}
	quiet.err = boom
	close(quiet.done)
	if err := quiet.Stop(); !errors.Is(err, boom) {
		t.Errorf("Stop = %v, want the serving error", err)
	}
	var disabled Running
	if err := disabled.Wait(context.Background()); err != nil {
		t.Errorf("Wait with serving disabled = %v", err)
	}
}
