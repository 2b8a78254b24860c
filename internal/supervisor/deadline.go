package supervisor

import (
	"fmt"
	"reflect"
	"time"

	"k8s.io/utils/clock"
)

// Deadline bounds a stop: timeout from the moment the first Wait began,
// cut short by CutWhen. It is used by one goroutine at a time.
type Deadline struct {
	clock   clock.Clock
	timeout time.Duration
	what    string // the flag or field that sets timeout, for Limit

	cuts   []*cut
	cutWhy string // the cut that set the deadline, "" if none did

	began    time.Time
	deadline time.Time
}

// cut is one CutWhen.
type cut struct {
	ch    <-chan struct{} // closes when the deadline is to be cut
	to    func() time.Time
	why   string
	taken bool
}

// NewDeadline returns a Deadline of timeout on the real clock; what names
// where timeout comes from (for example "--controller-shutdown-timeout")
// in Limit's text.
func NewDeadline(timeout time.Duration, what string) *Deadline {
	return NewDeadlineOn(clock.RealClock{}, timeout, what)
}

// NewDeadlineOn is NewDeadline on clk: the instants CutWhen's functions
// return are read on it too.
func NewDeadlineOn(clk clock.Clock, timeout time.Duration, what string) *Deadline {
	return &Deadline{clock: clk, timeout: timeout, what: what}
}

// CutWhen makes the deadline min(deadline, to()) from the moment ch is
// closed (at once if it already is); why describes the cut in Limit. It
// may be called several times, before the first Wait; every cut applies.
func (d *Deadline) CutWhen(ch <-chan struct{}, to func() time.Time, why string) {
	d.cuts = append(d.cuts, &cut{ch: ch, to: to, why: why})
}

// Cut reports whether a cut shortened the deadline.
func (d *Deadline) Cut() bool { return d.cutWhy != "" }

// Limit describes the bound in force, for error messages.
func (d *Deadline) Limit() string {
	if d.cutWhy != "" {
		return d.cutWhy
	}
	return fmt.Sprintf("%s (%v)", d.what, d.timeout)
}

func (d *Deadline) start() {
	if d.began.IsZero() {
		d.began = d.clock.Now()
		d.deadline = d.began.Add(d.timeout)
	}
}

// takeCuts applies each cut whose channel closed, and returns the
// channels of the cuts still pending, for Wait to watch.
func (d *Deadline) takeCuts() []<-chan struct{} {
	var pending []<-chan struct{}
	for _, c := range d.cuts {
		if c.taken {
			continue
		}
		select {
		case <-c.ch:
			c.taken = true
			if to := c.to(); to.Before(d.deadline) {
				d.deadline, d.cutWhy = to, c.why
			}
		default:
			pending = append(pending, c.ch)
		}
	}
	return pending
}

// Wait waits until done is closed (true) or the deadline passed (false),
// calling tick, if not nil, every third of the timeout.
func (d *Deadline) Wait(done <-chan struct{}, tick func()) bool {
	d.start()
	ticker := d.clock.NewTimer(max(d.timeout/3, time.Millisecond))
	defer func() { ticker.Stop() }()
	for {
		pending := d.takeCuts()
		timer := d.clock.NewTimer(d.deadline.Sub(d.clock.Now()))
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(done)},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ticker.C())},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C())},
		}
		for _, ch := range pending {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		chosen, _, _ := reflect.Select(cases)
		timer.Stop()
		switch chosen {
		case 0:
			return true
		case 1:
			ticker = d.clock.NewTimer(max(d.timeout/3, time.Millisecond))
			if tick != nil {
				tick()
			}
		case 2:
			select {
			case <-done: // both ready: done wins
				return true
			default:
				return false
			}
		}
	}
}
