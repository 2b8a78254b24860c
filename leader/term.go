package leader

import (
	"context"
	"sync"
	"time"

	"github.com/ctrlhost/ctrlhost/fence"
)

// Term is what a term function can learn about its leadership, from the
// context Run hands it (TermFrom).
type Term struct {
	gate *fence.Gate
	lost chan struct{}

	mu     sync.Mutex
	lostAt time.Time
	stopBy time.Time
}

type termKey struct{}

// TermFrom returns the Term whose context ctx is (or derives from), or nil
// when ctx does not come from an Elector's Run.
func TermFrom(ctx context.Context) *Term {
	t, _ := ctx.Value(termKey{}).(*Term)
	return t
}

// Gate is the term's write fence: open while the lease is known to be
// valid, shut for good once it was lost or the term returned.
func (t *Term) Gate() *fence.Gate { return t.gate }

// Lost is closed the moment this replica noticed that it lost the lease,
// whether or not the term was already stopping for another reason.
func (t *Term) Lost() <-chan struct{} { return t.lost }

// LostAt is when the loss was noticed; zero while the lease is held.
func (t *Term) LostAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lostAt
}

// StopBy is, once the lease was lost, the moment by which the term must
// have stopped: the start of the first renewal of the newest renewTime
// second plus LeaseDuration (as stored), less the drift allowance; another
// replica cannot take the lease before then (Config.StopBudget explains
// why). It is at least Config.StopBudget after LostAt, less the newest
// renewal's request latency, which can make it pass before the loss is
// noticed. Zero while the lease is held.
func (t *Term) StopBy() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopBy
}

func (t *Term) markLost(at, stopBy time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lostAt.IsZero() {
		t.lostAt, t.stopBy = at, stopBy
		close(t.lost)
	}
}

// validity is how long after a successful renewal's request started the
// lease counts as known-valid for fencing: the moment by which client-go
// must have noticed a failing renewal (RenewDeadline after the next round
// started, RetryPeriod later), never past the stored LeaseDuration. What is
// left until the lease expires for other replicas is the stop budget.
func (c Config) validity() time.Duration {
	return min(c.RenewDeadline+c.RetryPeriod, c.LeaseDuration.Truncate(time.Second))
}
