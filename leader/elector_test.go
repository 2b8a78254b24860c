package leader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/leader/leadertest"
)

const (
	testNamespace = "kube-system"
	testName      = "ctrl"
	// generous: only a broken implementation gets near it
	deadline = 10 * time.Second
)

func testConfig(id string) Config {
	return Config{
		Identity:      id,
		LeaseDuration: 2 * time.Second,
		RenewDeadline: 600 * time.Millisecond,
		RetryPeriod:   200 * time.Millisecond,
	}.WithDefaults(testName)
}

func newClientset() *fake.Clientset {
	cs := fake.NewClientset()
	leadertest.EnforceResourceVersion(cs)
	return cs
}

func newElector(t *testing.T, cs *fake.Clientset, cfg Config, policy LostLeasePolicy) *Elector {
	t.Helper()
	e, err := NewElector(
		cfg,
		cs,
		policy,
		testr.NewWithOptions(t, testr.Options{LogTimestamp: true}).WithName(cfg.Identity),
	)
	if err != nil {
		t.Fatalf("NewElector: %v", err)
	}
	return e
}

// runner runs one Elector in the background.
type runner struct {
	e      *Elector
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func start(t *testing.T, e *Elector, term func(context.Context) error) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{e: e, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = e.Run(ctx, term)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(deadline):
			t.Errorf("%s: Run did not return within %s of cancel", e.Identity(), deadline)
		}
	})
	return r
}

// wait waits for Run to return and gives its error.
func (r *runner) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(deadline):
		t.Fatalf("%s: Run did not return within %s", r.e.Identity(), deadline)
		return nil
	}
}

func (r *runner) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// recorder records every term: who ran it and when, and how many ran at once.
type recorder struct {
	mu        sync.Mutex
	active    int
	maxActive int
	terms     []termRecord
}

type termRecord struct {
	id         string
	start, end time.Time
}

// wrap turns body into a term that records itself.
func (r *recorder) wrap(id string, body func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		r.mu.Lock()
		r.active++
		r.maxActive = max(r.maxActive, r.active)
		i := len(r.terms)
		r.terms = append(r.terms, termRecord{id: id, start: time.Now()})
		r.mu.Unlock()
		err := body(ctx)
		r.mu.Lock()
		r.active--
		r.terms[i].end = time.Now()
		r.mu.Unlock()
		return err
	}
}

func (r *recorder) snapshot() []termRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.terms)
}

// checkNoOverlap asserts that terms never ran at the same time.
func (r *recorder) checkNoOverlap(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.maxActive > 1 {
		t.Errorf("%d terms ran at the same time", r.maxActive)
	}
	for i := 1; i < len(r.terms); i++ {
		prev, cur := r.terms[i-1], r.terms[i]
		if prev.end.IsZero() || cur.start.Before(prev.end) {
			t.Errorf(
				"term %d (%s) started at %s before term %d (%s) ended at %s",
				i,
				cur.id,
				cur.start.Format(time.StampMicro),
				i-1,
				prev.id,
				prev.end.Format(time.StampMicro),
			)
		}
	}
}

func untilDone(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// renewTime reads the lease's renew time without a *testing.T.
func renewTime(cs *fake.Clientset) (time.Time, error) {
	l, err := cs.CoordinationV1().
		Leases(testNamespace).
		Get(context.Background(), testName, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}, errors.New("lease has no renew time")
	}
	return l.Spec.RenewTime.Time, nil
}

func getLease(t *testing.T, cs *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	l, err := cs.CoordinationV1().
		Leases(testNamespace).
		Get(context.Background(), testName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease: %v", err)
	}
	return l
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func leaderOf(runners []*runner) *runner {
	for _, r := range runners {
		if r.e.IsLeader() && !r.returned() {
			return r
		}
	}
	return nil
}

// Three replicas share one API server. The leader is stopped twice; each
// time its term returns, the lease is released and another replica leads
// quickly. Terms never overlap.
func TestHandoffOnCancel(t *testing.T) {
	cs := newClientset()
	rec := &recorder{}
	var runners []*runner
	for i := range 3 {
		id := fmt.Sprintf("replica-%d", i)
		e := newElector(t, cs, testConfig(id), Exit)
		runners = append(runners, start(t, e, rec.wrap(id, untilDone)))
	}

	var latencies []time.Duration
	for round := range 2 {
		var l *runner
		poll.Until(t, "a replica leads", func() bool { l = leaderOf(runners); return l != nil })
		// IsLeader turns true a moment before the term function is called;
		// the handoff is measured from a term that has started.
		poll.Until(t, "the leader's term runs", func() bool {
			terms := rec.snapshot()
			return len(terms) > 0 && terms[len(terms)-1].id == l.e.Identity() &&
				terms[len(terms)-1].end.IsZero()
		})
		poll.Until(t, "every replica is ready", func() bool {
			for _, r := range runners {
				if !r.returned() && r.e.Ready(nil) != nil {
					return false
				}
			}
			return true
		})
		for _, r := range runners {
			if r.returned() {
				continue
			}
			if got := r.e.Leader(); got != l.e.Identity() {
				t.Errorf("%s: Leader() = %q, want %q", r.e.Identity(), got, l.e.Identity())
			}
		}
		select {
		case <-l.e.Elected():
		default:
			t.Errorf("%s leads but Elected() is not closed", l.e.Identity())
		}

		before := len(rec.snapshot())
		l.cancel()
		if err := l.wait(t); err != nil {
			t.Fatalf("round %d: Run returned %v after cancel, want nil", round, err)
		}
		if h := holderOf(getLease(t, cs)); h == l.e.Identity() {
			t.Errorf("round %d: lease still held by %s after its Run returned", round, h)
		}
		poll.Until(t, "another replica's term starts",
			func() bool { return len(rec.snapshot()) > before })
		terms := rec.snapshot()
		prev, next := terms[before-1], terms[before]
		if next.id == l.e.Identity() {
			t.Fatalf("round %d: the stopped replica led again", round)
		}
		latencies = append(latencies, next.start.Sub(prev.end))
	}
	for _, r := range runners {
		r.cancel()
		if err := r.wait(t); err != nil {
			t.Errorf("%s: Run returned %v, want nil", r.e.Identity(), err)
		}
	}
	rec.checkNoOverlap(t)
	t.Logf("handoff latency (term end to next term start): %v", latencies)
}

// While the leader's term is stopping after cancel, the lease keeps being
// renewed and the follower does not take over, even past LeaseDuration.
func TestLeaseRenewedWhileTermStops(t *testing.T) {
	cs := newClientset()
	rec := &recorder{}
	a := newElector(t, cs, testConfig("a"), Exit)
	b := newElector(t, cs, testConfig("b"), Exit)

	stopping := make(chan struct{})
	ra := start(t, a, rec.wrap("a", func(ctx context.Context) error {
		<-ctx.Done()
		close(stopping)
		// Keep stopping until the lease has been renewed for longer than
		// LeaseDuration.
		// This runs on the Elector's goroutine: no t.Fatal here.
		first, err := renewTime(cs)
		if err != nil {
			return err
		}
		if !poll.For(deadline, func() bool {
			now, err := renewTime(cs)
			return err == nil && now.Sub(first) > a.cfg.LeaseDuration
		}) {
			return fmt.Errorf("the lease was not renewed past LeaseDuration: "+
				"condition not met within %s", deadline)
		}
		return ctx.Err()
	}))
	poll.Until(t, "a leads", a.IsLeader)
	rb := start(t, b, rec.wrap("b", untilDone))
	poll.Until(t, "b follows a", func() bool { return b.Leader() == "a" })

	ra.cancel()
	select {
	case <-stopping:
	case <-time.After(deadline):
		t.Fatalf("a's term was not cancelled within %s", deadline)
	}
	if err := ra.wait(t); err != nil {
		t.Fatalf("a: Run returned %v", err)
	}
	poll.Until(t, "b's term starts", func() bool { return len(rec.snapshot()) == 2 })
	rb.cancel()
	if err := rb.wait(t); err != nil {
		t.Fatalf("b: Run returned %v", err)
	}
	rec.checkNoOverlap(t)
	if terms := rec.snapshot(); len(terms) != 2 || terms[0].id != "a" || terms[1].id != "b" {
		t.Errorf("terms = %+v, want a then b", terms)
	}
}

// A replica that stops without releasing (KeepLeaseOnCancel, like a crash)
// is replaced once the lease expired; the follower tries at once then.
func TestTakeoverAfterExpiry(t *testing.T) {
	cs := newClientset()
	rec := &recorder{}
	cfgA := testConfig("a")
	cfgA.KeepLeaseOnCancel = true
	a := newElector(t, cs, cfgA, Exit)
	b := newElector(t, cs, testConfig("b"), Exit)

	ra := start(t, a, rec.wrap("a", untilDone))
	poll.Until(t, "a leads", a.IsLeader)
	rb := start(t, b, rec.wrap("b", untilDone))
	poll.Until(t, "b follows a", func() bool { return b.Leader() == "a" })

	ra.cancel()
	if err := ra.wait(t); err != nil {
		t.Fatalf("a: Run returned %v", err)
	}
	lease := getLease(t, cs)
	if h := holderOf(lease); h != "a" {
		t.Fatalf("holder after a stopped with KeepLeaseOnCancel = %q, want a", h)
	}
	lastRenew := lease.Spec.RenewTime.Time
	// IsLeader turns true when b holds the lease, a moment before its term
	// function is called: wait for the term itself.
	poll.Until(t, "b's term starts", func() bool { return len(rec.snapshot()) == 2 })
	if !b.IsLeader() {
		t.Errorf("b's term runs but b.IsLeader() is false")
	}
	terms := rec.snapshot()
	if len(terms) != 2 || terms[1].id != "b" {
		t.Fatalf("terms = %+v, want a then b", terms)
	}
	// b may take over only once the lease expired: LeaseDuration after it
	// last saw a's renewal, which it cannot have seen before it was written.
	if took := terms[1].start.Sub(lastRenew); took < cfgA.LeaseDuration {
		t.Errorf(
			"b took over %v after a's last renewal, before the lease expired (LeaseDuration %v)",
			took,
			cfgA.LeaseDuration,
		)
	}
	if got := holderOf(getLease(t, cs)); got != "b" {
		t.Errorf("holder after takeover = %q, want b", got)
	}
	rb.cancel()
	if err := rb.wait(t); err != nil {
		t.Fatalf("b: Run returned %v", err)
	}
	rec.checkNoOverlap(t)
}

// Without list/watch permission (KCM's RBAC role), the watch gives up after
// one attempt and handoff still works through client-go's polling.
func TestHandoffWithoutWatch(t *testing.T) {
	cs := newClientset()
	var lists atomic.Int32
	cs.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return true, nil, apierrors.NewForbidden(
			coordinationv1.Resource("leases"),
			"",
			errors.New("RBAC says no"),
		)
	})
	rec := &recorder{}
	a := newElector(t, cs, testConfig("a"), Exit)
	b := newElector(t, cs, testConfig("b"), Exit)
	ra := start(t, a, rec.wrap("a", untilDone))
	poll.Until(t, "a leads", a.IsLeader)
	rb := start(t, b, rec.wrap("b", untilDone))
	poll.Until(t, "b follows a", func() bool { return b.Leader() == "a" })

	ra.cancel()
	if err := ra.wait(t); err != nil {
		t.Fatalf("a: Run returned %v", err)
	}
	poll.Until(t, "b's term starts", func() bool { return len(rec.snapshot()) == 2 })
	terms := rec.snapshot()
	t.Logf(
		"handoff latency without watch: %v (RetryPeriod %v)",
		terms[1].start.Sub(terms[0].end),
		b.cfg.RetryPeriod,
	)
	rb.cancel()
	if err := rb.wait(t); err != nil {
		t.Fatalf("b: Run returned %v", err)
	}
	rec.checkNoOverlap(t)
	if n := lists.Load(); n != 2 {
		t.Errorf("%d list attempts, want 1 per elector", n)
	}
}

// failUpdates makes every update of the lease fail while on is set.
func failUpdates(cs *fake.Clientset, on *atomic.Bool) {
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if on.Load() {
			return true, nil, errors.New("injected update failure")
		}
		return false, nil, nil
	})
}

func TestLostLease(t *testing.T) {
	t.Run("exit", func(t *testing.T) {
		cs := newClientset()
		var failing atomic.Bool
		failUpdates(cs, &failing)
		e := newElector(t, cs, testConfig("a"), Exit)
		termCancelled := make(chan struct{})
		r := start(t, e, func(ctx context.Context) error {
			<-ctx.Done()
			close(termCancelled)
			return ctx.Err()
		})
		poll.Until(t, "a leads", e.IsLeader)
		failing.Store(true)
		lostAt := time.Now()
		err := r.wait(t)
		t.Logf("Run returned %v after updates started failing", time.Since(lostAt))
		select {
		case <-termCancelled:
		default:
			t.Error("term's context was not cancelled")
		}
		if !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("Run returned %v, want ErrLeaseLost", err)
		}
		if want := testNamespace + "/" + testName; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name the lock %s", err, want)
		}
		if e.IsLeader() {
			t.Error("IsLeader after losing the lease")
		}
	})

	t.Run("recampaign", func(t *testing.T) {
		cs := newClientset()
		var failing atomic.Bool
		failUpdates(cs, &failing)
		e := newElector(t, cs, testConfig("a"), Recampaign)
		var terms atomic.Int32
		var running atomic.Bool
		r := start(t, e, func(ctx context.Context) error {
			terms.Add(1)
			running.Store(true)
			defer running.Store(false)
			<-ctx.Done()
			return ctx.Err()
		})
		poll.Until(t, "a leads", func() bool { return terms.Load() == 1 && e.IsLeader() })
		failing.Store(true)
		poll.Until(t, "the term stopped and a follows",
			func() bool { return !running.Load() && !e.IsLeader() })
		if r.returned() {
			t.Fatalf("Run returned %v under Recampaign", r.err)
		}
		if n := terms.Load(); n != 1 {
			t.Fatalf("%d terms while updates fail, want 1", n)
		}
		failing.Store(false)
		poll.Until(t, "a leads again", func() bool { return terms.Load() == 2 && e.IsLeader() })
		r.cancel()
		if err := r.wait(t); err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", err)
		}
		if h := holderOf(getLease(t, cs)); h != "" {
			t.Errorf("lease held by %q after Run returned, want released", h)
		}
	})
}

// When term returns on its own, Run releases the lease and returns term's
// result; after cancel, the lease is released unless KeepLeaseOnCancel.
func TestTermEndAndRelease(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name       string
		keep       bool
		term       func(context.Context) error
		cancel     bool // cancel Run's context once leading
		wantErr    error
		wantHolder string
	}{
		{name: "term error", term: func(context.Context) error { return boom }, wantErr: boom},
		{name: "term done", term: func(context.Context) error { return nil }},
		{name: "cancel releases", term: untilDone, cancel: true},
		{name: "cancel keeps", keep: true, term: untilDone, cancel: true, wantHolder: "a"},
		{name: "term error on cancel", term: func(ctx context.Context) error { <-ctx.Done(); return boom }, cancel: true, wantErr: boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := newClientset()
			cfg := testConfig("a")
			cfg.KeepLeaseOnCancel = tc.keep
			e := newElector(t, cs, cfg, Exit)
			r := start(t, e, tc.term)
			if tc.cancel {
				poll.Until(t, "a leads", e.IsLeader)
				r.cancel()
			}
			if err := r.wait(t); !errors.Is(err, tc.wantErr) ||
				(err == nil) != (tc.wantErr == nil) {
				t.Fatalf("Run returned %v, want %v", err, tc.wantErr)
			}
			if h := holderOf(getLease(t, cs)); h != tc.wantHolder {
				t.Errorf("holder after Run returned = %q, want %q", h, tc.wantHolder)
			}
			select {
			case <-e.Elected():
			default:
				t.Error("Elected() not closed")
			}
		})
	}
}

// A panicking term panics Run after Run's goroutines stopped; the lease is
// left to expire.
func TestTermPanics(t *testing.T) {
	cs := newClientset()
	e := newElector(t, cs, testConfig("a"), Exit)
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = e.Run(context.Background(), func(context.Context) error { panic("term bug") })
	}()
	if recovered != "term bug" {
		t.Fatalf("recovered %v, want the term's panic", recovered)
	}
	if h := holderOf(getLease(t, cs)); h != "a" {
		t.Errorf("holder after panic = %q, want a (not released)", h)
	}
	if e.IsLeader() {
		t.Error("IsLeader after Run panicked")
	}
}

func TestRunMisuse(t *testing.T) {
	cs := newClientset()
	e := newElector(t, cs, testConfig("a"), Exit)
	if err := e.Run(context.Background(), nil); err == nil {
		t.Error("Run(nil term) succeeded")
	}
	r := start(t, e, untilDone)
	poll.Until(t, "a leads", e.IsLeader)
	if err := e.Run(context.Background(), untilDone); err == nil ||
		!strings.Contains(err.Error(), "already running") {
		t.Errorf("second concurrent Run returned %v, want already running", err)
	}
	r.cancel()
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	// A cancelled context returns at once, without leading.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Run(ctx, func(context.Context) error { t.Error("term ran"); return nil }); err != nil {
		t.Errorf("Run with cancelled ctx returned %v", err)
	}
}

func TestNewElectorErrors(t *testing.T) {
	cs := newClientset()
	for _, tc := range []struct {
		name   string
		cfg    Config
		client bool
		policy LostLeasePolicy
		want   []string
	}{
		{name: "ok", cfg: testConfig("a"), client: true, policy: Recampaign},
		{name: "empty policy is Exit", cfg: testConfig("a"), client: true},
		{name: "everything wrong", cfg: Config{}, policy: "sometimes",
			want: []string{"client must not be nil", `policy "sometimes"`, "--leader-elect-resource-name", "--leader-elect-lease-duration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var client *fake.Clientset
			if tc.client {
				client = cs
			}
			var err error
			if client != nil {
				_, err = NewElector(tc.cfg, client, tc.policy, testr.New(t))
			} else {
				_, err = NewElector(tc.cfg, nil, tc.policy, testr.New(t))
			}
			checkErr(t, err, tc.want)
		})
	}
}

// checkErr asserts that err is nil when want is empty, else that it
// contains every string in want.
func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Errorf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

// A term that ignores its context after the lease was lost makes Watchdog
// fail once the lease is LeaseDuration+WatchdogGrace old.
func TestWatchdogWedgedTerm(t *testing.T) {
	cs := newClientset()
	var failing atomic.Bool
	failUpdates(cs, &failing)
	fc := clocktesting.NewFakeClock(time.Now())
	cfg := testConfig("a")
	cfg.Clock = fc
	e := newElector(t, cs, cfg, Exit)
	unblock := make(chan struct{})
	r := start(t, e, func(context.Context) error {
		<-unblock // ignores its context
		return nil
	})
	poll.Until(t, "a leads", e.IsLeader)
	if err := e.Watchdog(nil); err != nil {
		t.Fatalf("Watchdog while leading: %v", err)
	}
	failing.Store(true)
	poll.Until(t, "a notices losing the lease", func() bool { return !e.IsLeader() })
	if err := e.Watchdog(nil); err != nil {
		t.Errorf("Watchdog before the grace passed: %v", err)
	}
	fc.Step(cfg.LeaseDuration + WatchdogGrace + time.Second)
	if err := e.Watchdog(nil); err == nil {
		t.Error("Watchdog passes with a wedged term")
	}
	close(unblock)
	if err := r.wait(t); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Run returned %v, want ErrLeaseLost", err)
	}
	if err := e.Watchdog(nil); err != nil {
		t.Errorf("Watchdog after the term returned: %v", err)
	}
}

func TestHealthChecks(t *testing.T) {
	cs := newClientset()
	holder := func(s string) *string { return &s }
	for _, tc := range []struct {
		name        string
		leading     bool
		termRunning bool
		renewedAgo  time.Duration
		lease       *coordinationv1.LeaseSpec // nil: not observed
		deleted     bool
		wantDog     bool
		wantReady   bool
	}{
		{name: "nothing observed", wantReady: true},
		{name: "leading, fresh", leading: true, termRunning: true, lease: &coordinationv1.LeaseSpec{HolderIdentity: holder("a")}},
		{name: "leading, renewal just within limit", leading: true, termRunning: true, renewedAgo: 2*time.Second + WatchdogGrace,
			lease: &coordinationv1.LeaseSpec{HolderIdentity: holder("a")}},
		{name: "leading, stale", leading: true, termRunning: true, renewedAgo: 2*time.Second + WatchdogGrace + time.Millisecond,
			lease: &coordinationv1.LeaseSpec{HolderIdentity: holder("a")}, wantDog: true},
		{name: "lost, term still running", termRunning: true, renewedAgo: time.Hour,
			lease: &coordinationv1.LeaseSpec{HolderIdentity: holder("b")}, wantDog: true},
		{name: "following", renewedAgo: time.Hour, lease: &coordinationv1.LeaseSpec{HolderIdentity: holder("b")}},
		{name: "lease free", lease: &coordinationv1.LeaseSpec{HolderIdentity: holder("")}, wantReady: true},
		{name: "lease without holder", lease: &coordinationv1.LeaseSpec{}, wantReady: true},
		{name: "lease deleted", deleted: true, wantReady: true},
		{name: "lease names us but not leading", lease: &coordinationv1.LeaseSpec{HolderIdentity: holder("a")}, wantReady: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := clocktesting.NewFakeClock(time.Now())
			cfg := testConfig("a")
			cfg.Clock = fc
			e := newElector(t, cs, cfg, Exit)
			e.mu.Lock()
			e.leading, e.termRunning, e.lastRenew = tc.leading, tc.termRunning, fc.Now()
			e.mu.Unlock()
			switch {
			case tc.lease != nil:
				e.observe(nil, &coordinationv1.Lease{Spec: *tc.lease}, fromWatch)
			case tc.deleted:
				e.observe(nil, nil, fromWatch)
			}
			fc.Step(tc.renewedAgo)
			if err := e.Watchdog(nil); (err != nil) != tc.wantDog {
				t.Errorf("Watchdog = %v, want error: %v", err, tc.wantDog)
			}
			if err := e.Ready(nil); (err != nil) != tc.wantReady {
				t.Errorf("Ready = %v, want error: %v", err, tc.wantReady)
			}
		})
	}
	var nilElector *Elector
	if err := nilElector.Watchdog(nil); err != nil {
		t.Errorf("nil Elector Watchdog = %v", err)
	}
}

var _ clock.Clock = clocktesting.NewFakeClock(time.Time{})

// BenchmarkHandoff measures a graceful handoff between two replicas on a
// fake API server: from cancelling the leader's Run to the follower's term
// starting. NewClientset's field management costs milliseconds per write;
// NewSimpleClientset shows the cost of the handoff itself.
func BenchmarkHandoff(b *testing.B) {
	b.Run("NewClientset", func(b *testing.B) { benchmarkHandoff(b, fake.NewClientset()) })
	b.Run(
		"NewSimpleClientset",
		func(b *testing.B) { benchmarkHandoff(b, fake.NewSimpleClientset()) },
	)
}

func benchmarkHandoff(b *testing.B, cs *fake.Clientset) {
	leadertest.EnforceResourceVersion(cs)
	started := make(chan int, 1)
	electors := make([]*Elector, 2)
	type run struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	runs := make([]run, 2)
	launch := func(i int) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = electors[i].Run(ctx, func(ctx context.Context) error {
				started <- i
				<-ctx.Done()
				return nil
			})
		}()
		runs[i] = run{cancel, done}
	}
	follows := func(i, leader int) {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for electors[i].Leader() != electors[leader].Identity() || electors[i].Ready(nil) != nil {
			<-tick.C
		}
	}
	for i := range electors {
		e, err := NewElector(testConfig(fmt.Sprintf("replica-%d", i)), cs, Exit, logr.Discard())
		if err != nil {
			b.Fatal(err)
		}
		electors[i] = e
		launch(i)
	}
	cur := <-started
	follows(1-cur, cur)

	var total time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		runs[cur].cancel()
		next := <-started
		total += time.Since(t0)

		b.StopTimer()
		<-runs[cur].done
		launch(cur)
		follows(cur, next)
		cur = next
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/handoff")
	for i := range runs {
		runs[i].cancel()
		<-runs[i].done
	}
}

// TestLeaseWatchStopWaitsForItsList: stopping the lease watch waits for a
// list in flight, which client-go's reflector leaves running after its Run
// returned; before, a test that restored klog's global state after Run
// raced with that list (found in examples/kcm).
func TestLeaseWatchStopWaitsForItsList(t *testing.T) {
	cs := newClientset()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var returned atomic.Bool
	cs.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(entered) })
		<-release
		returned.Store(true)
		return false, nil, nil
	})
	e := newElector(t, cs, testConfig("a"), Exit)
	stop := e.watch(context.Background())
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the lease watch did not list within 10s")
	}
	// The list is released only once the informer's Run has returned
	// (client-go's reflector returned without it): stop must still wait.
	afterLeaseWatchRun = func() { close(release) }
	defer func() { afterLeaseWatchRun = nil }()
	stopped := make(chan bool)
	go func() {
		stop()
		stopped <- returned.Load()
	}()
	select {
	case ok := <-stopped:
		if !ok {
			t.Error("stop returned while the watch's list was still running")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return within 10s")
	}
}

// TestCancelledWhileAcquiringReleases: the write that acquires the lease
// reaches the API server but its answer is lost, because the campaign was
// cancelled meanwhile. Run must not leave the lease naming this replica:
// unrenewed, it would keep every other replica out until it expired (a
// slot of package shard changing owners waited out a lease this way).
func TestCancelledWhileAcquiringReleases(t *testing.T) {
	cs := newClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := cs.CoordinationV1().Leases(testNamespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: testName, Namespace: testNamespace},
		Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](1)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var lost atomic.Bool
	cs.PrependReactor(
		"update",
		"leases",
		func(action k8stesting.Action) (bool, runtime.Object, error) {
			obj := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
			if holderOf(obj) != "a" || !lost.CompareAndSwap(false, true) {
				return false, nil, nil
			}
			// The server applies it; the answer never arrives.
			if err := cs.Tracker().Update(action.GetResource(), obj, testNamespace); err != nil {
				return true, nil, err
			}
			cancel()
			return true, nil, context.Canceled
		},
	)
	e := newElector(t, cs, testConfig("a"), Exit)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, untilDone) }()
	select {
	case <-done:
	case <-time.After(deadline):
		t.Fatalf("Run did not return within %v of its cancellation", deadline)
	}
	if !lost.Load() {
		t.Fatal("the acquiring write was never made")
	}
	if h := holderOf(getLease(t, cs)); h == "a" {
		t.Errorf(
			"after Run returned, the lease still names a, which may never have known it held it",
		)
	}
}

// TestAcquiringSessionIsNotRestarted: the campaign's first session reads
// the lease as free and creates it; observing the free lease (from that
// read or from the watch) must not restart the session in the middle of
// its create. A restart cancelled the create, which the API server may
// still apply; the next session had to read the lease again (and, had the
// create not landed yet, created it again, got AlreadyExists for its own
// lease and led only a RetryPeriod later).
func TestAcquiringSessionIsNotRestarted(t *testing.T) {
	cs := newClientset()
	var gets, creates atomic.Int32
	cs.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets.Add(1)
		return false, nil, nil
	})
	cs.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates.Add(1)
		return false, nil, nil
	})
	var e *Elector
	// Hold the create until the campaign has dealt with every observation
	// of the free lease, or until its request is cancelled.
	held := heldCreates{Interface: cs, hold: func(ctx context.Context) {
		poll.For(deadline, func() bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			return ctx.Err() != nil || e.lease.known && e.pokedGen == e.lease.gen
		})
	}}
	e, err := NewElector(testConfig("a"), held, Exit, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	start(t, e, func(ctx context.Context) error {
		close(started)
		return untilDone(ctx)
	})
	select {
	case <-started:
	case <-time.After(deadline):
		t.Fatalf("no term within %v", deadline)
	}
	if g, c := gets.Load(), creates.Load(); g != 1 || c != 1 {
		t.Errorf("before the term: %d gets and %d creates; want 1 and 1 "+
			"(one session that read, created and led)", g, c)
	}
}

// heldCreates is a clientset whose Lease creates wait for hold first, and
// behave as a request the API server applied whose answer was lost when
// the request's context ended meanwhile.
type heldCreates struct {
	kubernetes.Interface
	hold func(context.Context)
}

func (h heldCreates) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return heldCoordination{h.Interface.CoordinationV1(), h.hold}
}

type heldCoordination struct {
	coordinationv1client.CoordinationV1Interface
	hold func(context.Context)
}

func (h heldCoordination) Leases(ns string) coordinationv1client.LeaseInterface {
	return heldLeases{h.CoordinationV1Interface.Leases(ns), h.hold}
}

type heldLeases struct {
	coordinationv1client.LeaseInterface
	hold func(context.Context)
}

func (h heldLeases) Create(ctx context.Context, lease *coordinationv1.Lease,
	opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	h.hold(ctx)
	out, err := h.LeaseInterface.Create(context.WithoutCancel(ctx), lease, opts)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, err
}
