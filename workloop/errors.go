package workloop

import (
	"errors"
	"fmt"
	"time"
)

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that the Loop logs it and drops the key instead of
// retrying: use it for failures that retrying cannot fix, such as a
// malformed key or an invalid spec.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err was wrapped by Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

type requeueAfter struct{ after time.Duration }

func (r requeueAfter) Error() string { return fmt.Sprintf("requeue after %s", r.after) }

// RequeueAfter is the error a sync returns to have its key synced again
// after d, without counting it as a failure (for example, waiting for a
// deadline in the object's spec).
func RequeueAfter(d time.Duration) error { return requeueAfter{d} }

// requeueDelay reports the delay err asks for, if it came from RequeueAfter.
func requeueDelay(err error) (time.Duration, bool) {
	var r requeueAfter
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}
