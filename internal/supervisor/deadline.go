package supervisor

import (
	"fmt"
	"time"
)

// Deadline bounds a stop: timeout from the moment the first Wait began,
// cut short by CutWhen. It is used by one goroutine at a time.
type Deadline struct {
	timeout time.Duration
	what    string // the flag or field that sets timeout, for Limit

	cut      <-chan struct{} // closes when the deadline is to be cut
	cutTo    func() time.Time
	cutWhy   string
	cutTaken bool

	began    time.Time
	deadline time.Time
}

// NewDeadline returns a Deadline of timeout; what names where timeout comes
// from (for example "--controller-shutdown-timeout") in Limit's text.
func NewDeadline(timeout time.Duration, what string) *Deadline {
	return &Deadline{timeout: timeout, what: what}
}

// CutWhen makes the deadline min(deadline, to()) from the moment ch is
// closed (at once if it already is); why describes the cut in Limit. It
// must be called before the first Wait.
func (d *Deadline) CutWhen(ch <-chan struct{}, to func() time.Time, why string) {
	d.cut, d.cutTo, d.cutWhy = ch, to, why
}

// Cut reports whether the deadline was cut.
func (d *Deadline) Cut() bool { return d.cutTaken }

// Limit describes the bound in force, for error messages.
func (d *Deadline) Limit() string {
	if d.cutTaken {
		return d.cutWhy
	}
	return fmt.Sprintf("%s (%v)", d.what, d.timeout)
}

func (d *Deadline) start() {
	if d.began.IsZero() {
		d.began = time.Now()
		d.deadline = d.began.Add(d.timeout)
	}
}

// takeCut applies the cut once its channel closed.
func (d *Deadline) takeCut() {
	if d.cutTaken || d.cut == nil {
		return
	}
	select {
	case <-d.cut:
	default:
		return
	}
	d.cutTaken = true
	if to := d.cutTo(); to.Before(d.deadline) {
		d.deadline = to
	}
}

// Wait waits until done is closed (true) or the deadline passed (false),
// calling tick, if not nil, every third of the timeout.
func (d *Deadline) Wait(done <-chan struct{}, tick func()) bool {
	d.start()
	ticker := time.NewTicker(max(d.timeout/3, time.Millisecond))
	defer ticker.Stop()
	for {
		d.takeCut()
		cut := d.cut
		if d.cutTaken {
			cut = nil
		}
		timer := time.NewTimer(time.Until(d.deadline))
		select {
		case <-done:
			timer.Stop()
			return true
		case <-cut:
			timer.Stop()
		case <-ticker.C:
			timer.Stop()
			if tick != nil {
				tick()
			}
		case <-timer.C:
			select {
			case <-done: // both ready: done wins
				return true
			default:
				return false
			}
		}
	}
}
