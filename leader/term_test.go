package leader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/fence"
	"github.com/ctrlhost/ctrlhost/internal/metrics"
	"github.com/ctrlhost/ctrlhost/internal/poll"
)

// A lease lost while the term is already stopping (Run's context was
// cancelled first) is still reported: the term learns of it through
// Term.Lost, and Run returns ErrLeaseLost under either policy.
func TestLeaseLostWhileStopping(t *testing.T) {
	for _, policy := range []LostLeasePolicy{Exit, Recampaign} {
		t.Run(string(policy), func(t *testing.T) {
			cs := newClientset()
			var failing atomic.Bool
			failUpdates(cs, &failing)
			e := newElector(t, cs, testConfig("a"), policy)
			type loss struct{ at, stopBy time.Time }
			sawLost := make(chan loss, 1)
			r := start(t, e, func(ctx context.Context) error {
				term := TermFrom(ctx)
				if term == nil {
					return errors.New("no Term in the term's context")
				}
				<-ctx.Done()
				// Stopping is slow; the renewals fail meanwhile.
				failing.Store(true)
				select {
				case <-term.Lost():
					sawLost <- loss{term.LostAt(), term.StopBy()}
				case <-time.After(deadline):
					return errors.New("Term.Lost not closed")
				}
				return ctx.Err()
			})
			poll.Until(t, "a leads", e.IsLeader)
			r.cancel()
			err := r.wait(t)
			if !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("Run returned %v, want ErrLeaseLost", err)
			}
			select {
			case l := <-sawLost:
				// StopBy counts from the renewals, so it leaves at least the
				// stop budget after the loss was noticed (less the last
				// renewal's latency, a few milliseconds on the fake), and
				// never a whole lease.
				left := l.stopBy.Sub(l.at)
				if l.stopBy.IsZero() || left < e.cfg.StopBudget()-50*time.Millisecond ||
					left >= e.cfg.LeaseDuration {
					t.Errorf(
						"StopBy is %v after LostAt, want at least the stop budget %v and less than the lease",
						left,
						e.cfg.StopBudget(),
					)
				}
			default:
				t.Error("the term did not see the loss")
			}
		})
	}
}

// The term's Gate is open while the lease is renewed, shuts before another
// replica could take the lease (the last renewal's start plus
// LeaseDuration), and stays shut after the term returned.
func TestTermGate(t *testing.T) {
	cs := newClientset()
	var failing atomic.Bool
	failUpdates(cs, &failing)
	// The newest renewal the fake accepted, no earlier than its request
	// started (the reactor runs inside the request).
	var lastRenewed atomic.Int64
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !failing.Load() {
			lastRenewed.Store(time.Now().UnixNano())
		}
		return false, nil, nil
	})
	e := newElector(t, cs, testConfig("a"), Recampaign)
	gates := make(chan *fence.Gate, 2)
	var terms atomic.Int32
	r := start(t, e, func(ctx context.Context) error {
		terms.Add(1)
		gates <- TermFrom(ctx).Gate()
		<-ctx.Done()
		return ctx.Err()
	})
	poll.Until(t, "a leads", func() bool { return e.IsLeader() && len(gates) == 1 })
	g := <-gates
	if !strings.Contains(g.Term(), "kube-system/ctrl") ||
		!strings.Contains(g.Term(), "identity a") {
		t.Errorf("Gate.Term() = %q, want the lock and identity", g.Term())
	}
	// Renewals keep it open well past one validity period.
	first := time.Now()
	poll.Until(t, "several renewals", func() bool { return time.Since(first) > 2*e.cfg.validity() })
	if err := g.Check("c"); err != nil {
		t.Fatalf("Check while leading and renewing: %v", err)
	}
	failing.Store(true)
	poll.Until(t, "the gate shuts", func() bool { return g.Check("c") != nil })
	shut := time.Now()
	if expiry := time.Unix(0, lastRenewed.Load()).Add(e.cfg.LeaseDuration); !shut.Before(expiry) {
		t.Errorf("the gate shut %v after the lease could pass to another replica", shut.Sub(expiry))
	}
	if err := g.Check("c"); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("Check after renewals failed = %v, want ErrFenced", err)
	}
	poll.Until(t, "a notices the loss", func() bool { return !e.IsLeader() })
	failing.Store(false)
	poll.Until(t, "a leads again",
		func() bool { return terms.Load() == 2 && e.IsLeader() && len(gates) == 1 })
	if err := g.Check("c"); err == nil || !strings.Contains(err.Error(), "lost") {
		t.Errorf(
			"the first term's gate after a new term started: %v, want shut for good (lease lost)",
			err,
		)
	}
	g2 := <-gates
	if err := g2.Check("c"); err != nil {
		t.Errorf("the new term's gate: %v", err)
	}
	r.cancel()
	if err := r.wait(t); err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if err := g2.Check("c"); err == nil || !strings.Contains(err.Error(), "term ended") {
		t.Errorf("gate after the term returned: %v, want shut (term ended)", err)
	}
}

// A term that lost its lease and left work running ends Run even under
// Recampaign: standing again could start a term beside that work.
func TestNoRecampaignWithWorkStillRunning(t *testing.T) {
	cs := newClientset()
	var failing atomic.Bool
	failUpdates(cs, &failing)
	e := newElector(t, cs, testConfig("a"), Recampaign)
	var terms atomic.Int32
	r := start(t, e, func(ctx context.Context) error {
		terms.Add(1)
		failing.Store(true)
		<-ctx.Done()
		return fmt.Errorf("a controller did not stop: %w", ErrTermStillRunning)
	})
	err := r.wait(t)
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ErrTermStillRunning) {
		t.Errorf("Run = %v, want ErrLeaseLost and ErrTermStillRunning", err)
	}
	if n := terms.Load(); n != 1 {
		t.Errorf("%d terms ran, want 1 (no campaign after the stragglers)", n)
	}
}

func TestTermFromOutsideATerm(t *testing.T) {
	if TermFrom(context.Background()) != nil {
		t.Error("TermFrom(background) is not nil")
	}
}

// A term that returns with work still running (ErrTermStillRunning) does
// not get its lease released, under cancellation or on its own: the lease
// must expire before another replica may lead.
func TestLeaseKeptWhenTermLeftWorkRunning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel bool
	}{{"cancelled", true}, {"returned on its own", false}} {
		t.Run(tc.name, func(t *testing.T) {
			cs := newClientset()
			e := newElector(t, cs, testConfig("a"), Exit)
			stuck := fmt.Errorf("controllers did not stop: %w", ErrTermStillRunning)
			leading := make(chan struct{})
			r := start(t, e, func(ctx context.Context) error {
				close(leading)
				if tc.cancel {
					<-ctx.Done()
				}
				return stuck
			})
			select {
			case <-leading:
			case <-time.After(deadline):
				t.Fatal("a never led")
			}
			if tc.cancel {
				r.cancel()
			}
			if err := r.wait(t); !errors.Is(err, ErrTermStillRunning) {
				t.Fatalf("Run = %v, want the term's error", err)
			}
			if h := holderOf(getLease(t, cs)); h != "a" {
				t.Errorf("lease holder after Run returned = %q, want a (kept until it expires)", h)
			}
		})
	}
}

// leader_election_master_status is 1 while a lock is held and 0 once its
// term ended and once Run returned, whether the lock is the main one or a
// shard group's slot or member Lease (all are Electors). client-go leaves
// it at 1 when its session is cancelled.
func TestLeaderStatusMetricFollowsTheLease(t *testing.T) {
	metrics.InstallClientGoProviders()
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterClientGo(reg); err != nil {
		t.Fatal(err)
	}
	status := func(lease string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "leader_election_master_status" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "name" && l.GetValue() == lease {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		return -1
	}
	cfg := testConfig("a")
	cfg.Name = "status-metric-lease"
	e := newElector(t, newClientset(), cfg, Exit)
	leading := make(chan struct{})
	r := start(t, e, func(ctx context.Context) error {
		close(leading)
		<-ctx.Done()
		return nil
	})
	<-leading
	poll.Until(t, "the gauge shows the lease held", func() bool { return status(cfg.Name) == 1 })
	r.cancel()
	if err := r.wait(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got := status(cfg.Name); got != 0 {
		t.Errorf("leader_election_master_status after Run returned = %v, want 0", got)
	}
}
