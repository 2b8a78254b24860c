package supervisor

import (
	"errors"
	"slices"
	"sync"
)

// Group tracks named goroutines. The zero value is not usable; create one
// with NewGroup.
type Group struct {
	failed     chan struct{} // closed by the first Fail
	failedOnce sync.Once

	mu      sync.Mutex
	running []string
	sealed  bool          // Wait began
	idle    chan struct{} // closed once sealed and nothing runs
	errs    []error
}

// NewGroup returns an empty Group.
func NewGroup() *Group {
	return &Group{failed: make(chan struct{}), idle: make(chan struct{})}
}

// Go runs f on a goroutine listed under name until f returns. Names need
// not be unique. Go may be called from goroutines of the Group, also after
// Wait began.
func (g *Group) Go(name string, f func()) {
	g.mu.Lock()
	g.running = append(g.running, name)
	g.mu.Unlock()
	go func() {
		defer g.finished(name)
		f()
	}()
}

func (g *Group) finished(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(g.running, name); i >= 0 {
		g.running = slices.Delete(g.running, i, i+1)
	}
	if g.sealed && len(g.running) == 0 {
		close(g.idle)
	}
}

// Fail records err as a failure of the Group and closes Failed.
func (g *Group) Fail(err error) {
	g.mu.Lock()
	g.errs = append(g.errs, err)
	g.mu.Unlock()
	g.failedOnce.Do(func() { close(g.failed) })
}

// Failed is closed by the first Fail.
func (g *Group) Failed() <-chan struct{} { return g.failed }

// Err joins every error given to Fail.
func (g *Group) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.Join(g.errs...)
}

// Running returns the names of the goroutines running now, sorted.
func (g *Group) Running() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.running)
	slices.Sort(out)
	return out
}

// Idle is closed once Wait began and every goroutine has returned: after a
// Wait that gave up, it tells when the stragglers are gone.
func (g *Group) Idle() <-chan struct{} { return g.idle }

// Wait waits until every goroutine returned (nil) or d passed (the names
// still running). onTick, if not nil, is called with those names every third
// of d's timeout while waiting. Wait may be called once.
func (g *Group) Wait(d *Deadline, onTick func(running []string)) []string {
	g.mu.Lock()
	if !g.sealed {
		g.sealed = true
		if len(g.running) == 0 {
			close(g.idle)
		}
	}
	g.mu.Unlock()
	tick := func() {
		if onTick != nil {
			onTick(g.Running())
		}
	}
	if d.Wait(g.idle, tick) {
		return nil
	}
	return g.Running()
}
