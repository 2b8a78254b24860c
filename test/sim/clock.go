package sim

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/leader"
)

// scaledClock is a replica's clock: each of its seconds lasts scale real
// (in the bubble: fake) seconds, counted from origin.
type scaledClock struct {
	origin time.Time
	scale  float64
}

var _ leader.ScaledClock = scaledClock{}

func (c scaledClock) Scale() float64 { return c.scale }

func (c scaledClock) real(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.scale)
}

func (c scaledClock) Now() time.Time {
	return c.origin.Add(time.Duration(float64(time.Since(c.origin)) / c.scale))
}

func (c scaledClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c scaledClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

func (c scaledClock) NewTimer(d time.Duration) clock.Timer {
	return &scaledTimer{c: c, t: time.NewTimer(c.real(d))}
}

func (c scaledClock) Sleep(d time.Duration) { time.Sleep(c.real(d)) }

func (c scaledClock) Tick(d time.Duration) <-chan time.Time { return time.Tick(c.real(d)) }

// scaledTimer is a real timer of the scaled duration. Its channel carries
// the real time it fired: callers only wait on it.
type scaledTimer struct {
	c scaledClock
	t *time.Timer
}

func (t *scaledTimer) C() <-chan time.Time { return t.t.C }

func (t *scaledTimer) Stop() bool { return t.t.Stop() }

func (t *scaledTimer) Reset(d time.Duration) bool { return t.t.Reset(t.c.real(d)) }
