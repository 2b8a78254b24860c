package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/ctrlhost/ctrlhost/fence"
)

// LostLeasePolicy says what Run does after the lease was lost and the term
// has returned.
type LostLeasePolicy string

const (
	// Exit makes Run return an error wrapping ErrLeaseLost. The caller
	// decides whether the process exits.
	Exit LostLeasePolicy = "exit"
	// Recampaign makes Run campaign again as a follower.
	Recampaign LostLeasePolicy = "recampaign"
)

// ErrLeaseLost is wrapped by the error Run returns under the Exit policy when
// this replica stopped leading because it could not renew the lease.
var ErrLeaseLost = errors.New("leader election lost")

// ErrTermStillRunning is wrapped by a term's error when the term returned
// while some of its work is still running (controllers that ignored
// cancellation past their deadline). Run then never releases the lease: it
// expires, so no other replica can take over before LeaseDuration has
// passed, by when the process has usually exited.
var ErrTermStillRunning = errors.New("term returned with work still running")

// WatchdogGrace is how long past LeaseDuration without a renewal Watchdog
// tolerates while a term is still running; KCM uses the same 20s.
const WatchdogGrace = 20 * time.Second

// expirySlack delays a follower's early attempt after the lease expired, so
// that client-go, which times the expiry from its own observation a moment
// later than ours, agrees that it has.
const expirySlack = 10 * time.Millisecond

// Elector runs leader election on one Lease with client-go's LeaderElector
// and runs a term while it leads. Create it with NewElector.
type Elector struct {
	cfg    Config
	client kubernetes.Interface
	policy LostLeasePolicy
	log    logr.Logger
	// clientGoLog is what client-go logs through, made once: logr.New
	// initialises the sink, which must not happen while it is in use.
	clientGoLog logr.Logger
	clock       clock.Clock
	desc        string

	running     atomic.Bool
	elected     chan struct{}
	electedOnce sync.Once
	// changed is signalled (never blocking) when the observed lease changed.
	changed chan struct{}

	mu          sync.Mutex
	leading     bool      // holds the lease and has not noticed losing it
	termRunning bool      // a term has started and not yet returned
	lastRenew   time.Time // last successful write of the lease naming us
	renewStart  time.Time // when the request of the newest such write started
	// anchor is when the request of the first such write whose renewTime
	// is in the same second as the newest one's started (anchorSecond):
	// what other replicas time the lease from.
	anchor       time.Time
	anchorSecond int64
	gate         *fence.Gate // the running term's write fence, nil between terms
	lease        leaseState
	pokedGen     uint64 // lease.gen for which an early attempt was made

	// The Lease watch, shared by Run and Observe.
	watchMu        sync.Mutex
	watchRefs      int
	watchStop      func()
	watchForbidden atomic.Bool // the API server refused the list or watch
}

// NewElector validates cfg and policy and returns an Elector. It starts
// nothing. An empty policy means Exit. cfg is used as given: call
// WithDefaults first.
func NewElector(
	cfg Config,
	client kubernetes.Interface,
	policy LostLeasePolicy,
	log logr.Logger,
) (*Elector, error) {
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if client == nil {
		errs = append(errs, errors.New("leader: client must not be nil"))
	}
	switch policy {
	case "":
		policy = Exit
	case Exit, Recampaign:
	default:
		errs = append(
			errs,
			fmt.Errorf(
				"leader: lost-lease policy %q is unknown; use %q or %q",
				policy,
				Exit,
				Recampaign,
			),
		)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	desc := cfg.describe()
	return &Elector{
		cfg:         cfg,
		client:      client,
		policy:      policy,
		log:         log.WithValues("lock", desc),
		clientGoLog: clientGoLogger(log.WithValues("lock", desc)).V(1),
		clock:       cfg.Clock,
		desc:        desc,
		elected:     make(chan struct{}),
		changed:     make(chan struct{}, 1),
	}, nil
}

// Identity is the identity this replica writes into the Lease.
func (e *Elector) Identity() string { return e.cfg.Identity }

// Elected is closed the first time this replica leads.
func (e *Elector) Elected() <-chan struct{} { return e.elected }

// IsLeader reports whether this replica holds the lease: from the moment it
// acquired it until it noticed losing it or its term returned. While a term
// stops because Run's context was cancelled, the lease is still renewed and
// IsLeader stays true.
func (e *Elector) IsLeader() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leading
}

// Leader is the holder identity last observed in the Lease, "" if none was
// observed yet or the lease is free.
func (e *Elector) Leader() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lease.holder()
}

// Run campaigns for the lease until ctx is done, and calls term each time
// this replica leads. It waits for term to return before it releases the
// lease or campaigns again; term's context is cancelled when the lease is
// lost or ctx is done. While term stops because ctx was cancelled the lease
// keeps being renewed, and it is released only after term returned (unless
// KeepLeaseOnCancel).
//
// Run returns nil when ctx was cancelled (or term's error, if term returned
// one that is not context.Canceled). When the lease was lost it returns an
// error wrapping ErrLeaseLost under Exit, and campaigns again under
// Recampaign. When term returns on its own while leading, Run releases the
// lease and returns term's result. Every goroutine Run starts has ended when
// it returns. Run must not be called concurrently on one Elector.
func (e *Elector) Run(ctx context.Context, term func(ctx context.Context) error) error {
	if term == nil {
		return errors.New("leader: term must not be nil")
	}
	if !e.running.CompareAndSwap(false, true) {
		return fmt.Errorf("leader: Run is already running for lock %s", e.desc)
	}
	defer e.running.Store(false)

	// Sessions of client-go's elector outlive ctx (the lease is renewed until
	// term returned), so they get ctx's values but not its cancellation.
	// client-go logs through the logger it finds in the context, one level
	// quieter than ours: we log the role changes ourselves.
	base := klog.NewContext(context.WithoutCancel(ctx), e.clientGoLog)

	stopWatch := e.sharedWatch(base)
	defer stopWatch()

	for {
		if ctx.Err() != nil {
			return nil
		}
		c, err := e.newCampaign()
		if err != nil {
			return err
		}
		s, lctx := e.campaign(ctx, base, c)
		if s == nil {
			return nil
		}
		lost, abandoned, termErr := e.lead(ctx, s, lctx, term)
		switch {
		case lost:
			// Checked before ctx: a lease lost while the term was already
			// stopping is still a loss the caller must hear of.
			// The term has returned, so giving the lease back (if the API
			// server still names us) cannot make two terms overlap.
			e.releaseUnlessRunning(base, c, termErr, abandoned)
			lostErr := fmt.Errorf(
				"leader: lock %s: identity %s: %w",
				e.desc,
				e.cfg.Identity,
				ErrLeaseLost,
			)
			if termErr != nil && !errors.Is(termErr, context.Canceled) {
				e.log.Error(termErr, "Term failed after the lease was lost")
			} else {
				termErr = nil
			}
			if e.policy == Exit || ctx.Err() != nil || errors.Is(termErr, ErrTermStillRunning) {
				// A term that left work running ends the campaign under
				// either policy: standing again could start a new term
				// beside the work still running.
				return errors.Join(lostErr, termErr)
			}
			e.log.Info("Lease lost and term stopped; campaigning again")
		case ctx.Err() != nil:
			if e.cfg.KeepLeaseOnCancel {
				e.log.Info("Term stopped; keeping the lease until it expires (KeepLeaseOnCancel)")
			} else {
				e.releaseUnlessRunning(base, c, termErr, abandoned)
			}
			if errors.Is(termErr, context.Canceled) || errors.Is(termErr, ctx.Err()) {
				return nil
			}
			return termErr
		default:
			e.releaseUnlessRunning(base, c, termErr, abandoned)
			if termErr != nil {
				e.log.Error(termErr, "Term failed; lease released")
			} else {
				e.log.Info("Term returned; lease released")
			}
			return termErr
		}
	}
}

// Observe follows the Lease without standing for it, until ctx is done, so
// that Leader and Ready know the holder on a replica that does not
// campaign for this lock (a follower of the main lock follows the
// migration lock this way, and reports ready when another replica holds
// it). It may run beside Run: both share one watch. Where the API server
// forbids the watch (KCM's RBAC grants get and update only), it reads the
// Lease every RetryPeriod instead. It makes no write.
func (e *Elector) Observe(ctx context.Context) {
	base := klog.NewContext(context.WithoutCancel(ctx), e.clientGoLog)
	stop := e.sharedWatch(base)
	defer stop()
	for {
		tick := e.clock.NewTimer(e.cfg.RetryPeriod)
		select {
		case <-ctx.Done():
			tick.Stop()
			return
		case <-tick.C():
		}
		if !e.watchForbidden.Load() {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, e.onRealClock(e.cfg.RenewDeadline))
		lease, err := e.client.CoordinationV1().
			Leases(e.cfg.Namespace).
			Get(rctx, e.cfg.Name, metav1.GetOptions{})
		cancel()
		switch {
		case err == nil:
			e.observe(nil, lease, fromGet)
		case apierrors.IsNotFound(err):
			e.observe(nil, nil, fromGet)
		}
	}
}

// sharedWatch starts the Lease watch unless it runs already, and returns
// a function that ends this caller's use of it (the last one stops it).
func (e *Elector) sharedWatch(base context.Context) (stop func()) {
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	e.watchRefs++
	if e.watchRefs == 1 {
		e.watchStop = e.watch(base)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			e.watchMu.Lock()
			defer e.watchMu.Unlock()
			e.watchRefs--
			if e.watchRefs == 0 {
				e.watchStop()
				e.watchStop = nil
			}
		})
	}
}

// campaign is one period of following: a client-go LeaderElector and its
// lock. It is replaced after every term so that a new period starts from a
// fresh observation, as a newly started replica would.
type campaign struct {
	le   *leaderelection.LeaderElector
	lock *resourcelock.LeaseLock

	// client-go's own view of the lease, mirrored so that an early attempt
	// on expiry is timed as client-go will judge it. Guarded by Elector.mu.
	lastGet   *coordinationv1.LeaseSpec // last spec a Get returned
	view      coordinationv1.LeaseSpec  // spec client-go last timed
	viewAt    time.Time                 // when it did
	viewKnown bool

	// uncertain: a write naming us got no answer from the API server (it
	// may have been applied), so the campaign may hold the lease unaware.
	uncertain atomic.Bool

	// inflight counts the session's requests on the lease that have not
	// returned. Guarded by Elector.mu. While one is out, no early attempt is
	// made: the session is acting, and a restart would cancel a write the
	// API server may still apply.
	inflight int
}

func (e *Elector) newCampaign() (*campaign, error) {
	c := &campaign{}
	c.lock = &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name},
		Client:     leasesGetter{e: e, c: c},
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.cfg.Identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: c.lock,
		// LeaseDuration is not this replica's to time: it goes into the
		// Lease in whole seconds, and every replica times it on its own
		// clock.
		LeaseDuration: e.cfg.LeaseDuration,
		RenewDeadline: e.onRealClock(e.cfg.RenewDeadline),
		RetryPeriod:   e.onRealClock(e.cfg.RetryPeriod),
		Callbacks: leaderelection.LeaderCallbacks{
			// client-go calls this on a goroutine of its own. It only hands
			// the leadership context to the session that acquired it.
			OnStartedLeading: func(lctx context.Context) {
				if s := sessionFrom(lctx); s != nil {
					s.started <- lctx
				}
			},
			OnStoppedLeading: func() {},
		},
		// The release is ours, after the term returned: client-go would
		// also release when renewal failed, while the term still runs.
		ReleaseOnCancel: false,
		Name:            e.cfg.Name,
	})
	if err != nil {
		return nil, fmt.Errorf("leader: lock %s: %w", e.desc, err)
	}
	c.le = le
	return c, nil
}

// session is one call of client-go's LeaderElector.Run. A follower restarts
// it, because its first acquisition attempt is immediate; a leader's session
// lasts until its term returned.
type session struct {
	cancel   context.CancelFunc
	done     chan struct{}        // closed when LeaderElector.Run returned
	started  chan context.Context // OnStartedLeading's context; buffered
	acquired atomic.Bool          // a write naming us succeeded in this session
	lctx     context.Context      // received from started, if it was
}

type sessionKey struct{}

func sessionFrom(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	return s
}

func (e *Elector) startSession(base context.Context, c *campaign) *session {
	s := &session{done: make(chan struct{}), started: make(chan context.Context, 1)}
	ctx, cancel := context.WithCancel(context.WithValue(base, sessionKey{}, s))
	s.cancel = cancel
	e.mu.Lock()
	e.pokedGen = e.lease.gen // the first attempt is immediate anyway
	e.mu.Unlock()
	go func() {
		defer close(s.done)
		c.le.Run(ctx)
	}()
	return s
}

// stop ends the session and waits for it, including client-go's goroutine
// that calls OnStartedLeading, which exists exactly when the session
// acquired the lease. It reports whether it did.
func (s *session) stop() bool {
	s.cancel()
	<-s.done
	if !s.acquired.Load() {
		return false
	}
	if s.lctx == nil {
		s.lctx = <-s.started
	}
	return true
}

// campaign follows until this replica leads, and returns the leading
// session and its leadership context, or nil when ctx is done. Whenever the
// lease becomes free (released, deleted, or expired by client-go's
// reckoning) while the session waits for its next RetryPeriod tick, it
// restarts the session so that client-go tries at once. A session that
// read the lease as free is already trying, and one with a request out is
// left to finish it.
func (e *Elector) campaign(ctx, base context.Context, c *campaign) (*session, context.Context) {
	e.log.Info("Campaigning for the lease", "identity", e.cfg.Identity)
	s := e.startSession(base, c)
	for {
		wait, reason, due := e.nextAttempt(c)
		var timer clock.Timer
		var fire <-chan time.Time
		if due {
			if wait <= 0 {
				e.retryNow(base, c, &s, reason)
				continue
			}
			timer = e.clock.NewTimer(wait)
			fire = timer.C()
		}
		select {
		case lctx := <-s.started:
			stopTimer(timer)
			s.lctx = lctx
			return s, lctx
		case <-ctx.Done():
			stopTimer(timer)
			// Acquired just as ctx ended, or perhaps acquired (the answer to
			// a write naming us was lost when ctx ended): no term ran, and
			// the lease must not stay ours, unrenewed, until it expires.
			// release checks the holder first.
			if acquired := s.stop(); acquired || c.uncertain.Load() {
				if e.cfg.KeepLeaseOnCancel {
					e.log.Info(
						"Acquired the lease (or may have) while stopping; keeping it (KeepLeaseOnCancel)",
					)
				} else {
					e.release(base, c)
				}
			}
			return nil, nil
		case <-e.changed:
			stopTimer(timer)
		case <-fire:
			if e.busy(c) {
				continue // judged again when the request returns
			}
			e.retryNow(base, c, &s, reason)
		case <-s.done:
			// LeaderElector.Run returns on its own only when its context
			// ends; be robust anyway.
			stopTimer(timer)
			e.retryNow(base, c, &s, "session ended")
		}
	}
}

func stopTimer(t clock.Timer) {
	if t != nil {
		t.Stop()
	}
}

// busy reports whether the session has a request on the lease out.
func (e *Elector) busy(c *campaign) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return c.inflight > 0
}

// retryNow restarts the session, whose first attempt is immediate.
func (e *Elector) retryNow(base context.Context, c *campaign, s **session, reason string) {
	e.log.V(1).Info("Lease may be free; attempting to acquire it now", "reason", reason)
	(*s).stop() // if it acquired meanwhile, the next session renews at once
	*s = e.startSession(base, c)
}

// nextAttempt says whether an early attempt is due for the current
// observation of the lease, in how long, and why.
func (e *Elector) nextAttempt(c *campaign) (time.Duration, string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := &e.lease
	if !st.known || e.pokedGen == st.gen || c.inflight > 0 {
		return 0, "", false
	}
	if !st.exists {
		return 0, "lease deleted", true
	}
	if st.holder() == "" {
		return 0, "lease released", true
	}
	seen := st.seenAt
	if c.viewKnown && c.viewAt.After(seen) && specEqual(&c.view, &st.spec) {
		seen = c.viewAt
	}
	var secs int32
	if st.spec.LeaseDurationSeconds != nil {
		secs = *st.spec.LeaseDurationSeconds
	}
	expiry := seen.Add(time.Duration(secs)*time.Second + expirySlack)
	return expiry.Sub(e.clock.Now()), "lease expired", true
}

// lead runs term while this replica leads and returns once term returned
// and the session ended; lost reports that the lease was lost before term
// returned.
//
// Once term returned, the term's gate is shut and its writes still in
// flight are waited for (fence.Gate.Drain, within drainBound) while the
// lease is still held; abandoned counts those given up, after which the
// lease must not be released.
func (e *Elector) lead(ctx context.Context, s *session, lctx context.Context,
	term func(context.Context) error) (lost bool, abandoned int, err error) {
	t := &Term{
		gate: fence.NewGate(fmt.Sprintf("lock %s, identity %s", e.desc, e.cfg.Identity), e.clock),
		lost: make(chan struct{}),
	}
	// The term's context is cancelled by watchTerm alone, so that a lost
	// lease has closed the gate and Term.Lost before the term can see it.
	termCtx, cancelTerm := context.WithCancel(
		context.WithValue(context.WithoutCancel(lctx), termKey{}, t),
	)
	if l, lerr := logr.FromContext(ctx); lerr == nil {
		termCtx = logr.NewContext(termCtx, l)
	} else {
		termCtx = logr.NewContext(termCtx, e.log)
	}

	e.mu.Lock()
	e.leading, e.termRunning = true, true
	e.gate = t.gate
	// The write that acquired the lease is the first renewal.
	t.gate.Extend(e.gateUntil())
	e.mu.Unlock()
	e.electedOnce.Do(func() { close(e.elected) })
	e.log.Info("Became leader; starting term", "identity", e.cfg.Identity)
	start := e.clock.Now()

	termDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { e.watchTerm(ctx, lctx, termDone, cancelTerm, t) })
	defer func() {
		drain, cancelDrain := context.WithTimeout(context.Background(), e.drainBound())
		abandoned = t.gate.Drain(drain, "the term ended")
		cancelDrain()
		close(termDone)
		cancelTerm()
		wg.Wait()
		// The session is still running, so lctx ended only if renewal failed.
		lost = lctx.Err() != nil
		s.stop()
		e.resetStatus()
		e.mu.Lock()
		e.leading, e.termRunning = false, false
		e.gate = nil
		e.mu.Unlock()
		e.log.Info("Stopped leading", "termDuration", e.clock.Since(start), "leaseLost", lost)
	}()
	return false, 0, term(termCtx)
}

// watchTerm cancels the term's context when ctx is done or the lease is lost.
func (e *Elector) watchTerm(
	ctx, lctx context.Context,
	termDone <-chan struct{},
	cancelTerm context.CancelFunc,
	t *Term,
) {
	ctxDone := ctx.Done()
	for {
		select {
		case <-termDone:
			return
		case <-ctxDone:
			ctxDone = nil
			e.log.Info("Stopping term; the lease is renewed until it returns")
			cancelTerm()
		case <-lctx.Done():
			t.gate.Close("the lease was lost")
			now := e.clock.Now()
			e.mu.Lock()
			e.leading = false
			stopBy := e.cfg.expiry(e.anchor)
			e.mu.Unlock()
			t.markLost(now, stopBy)
			e.log.Info(
				"Lost the lease; stopping term",
				"stopBy",
				stopBy.Sub(now).Round(time.Millisecond),
			)
			cancelTerm()
			<-termDone
			return
		}
	}
}

// gateUntil is how long the term's writes may go out after the newest
// renewal: until client-go must have noticed a failing renewal (its start
// plus RenewDeadline and RetryPeriod), and never past the moment another
// replica may take the lease. e.mu is held.
func (e *Elector) gateUntil() time.Time {
	until := e.renewStart.Add(e.cfg.validity())
	if exp := e.cfg.expiry(e.anchor); exp.Before(until) {
		until = exp
	}
	return until
}

// onRealClock converts d, measured on Config.Clock, to the real clock,
// which client-go's LeaderElector and request timeouts run on: scaled by
// the clock's ScaledClock.Scale when it has one, else unchanged.
func (e *Elector) onRealClock(d time.Duration) time.Duration {
	if sc, ok := e.clock.(ScaledClock); ok {
		return time.Duration(float64(d) * sc.Scale())
	}
	return d
}

// resetStatus sets client-go's leader_election_master_status for the lock
// back to 0 once a leading session ended. client-go sets it to 0 only when
// a renewal fails, not when its session is cancelled (it expects the
// process to exit then), but also whenever a LeaderElector is built: one is
// built for that, through whatever metrics provider the process installed.
func (e *Elector) resetStatus() {
	if _, err := e.newCampaign(); err != nil {
		e.log.V(1).Info("Cannot reset the leader status metric", "err", err.Error())
	}
}

// releaseUnlessRunning releases the lease unless the term left work
// running (ErrTermStillRunning) or abandoned writes in flight (the API
// server may still apply them), in which case the lease must expire.
func (e *Elector) releaseUnlessRunning(base context.Context, c *campaign, termErr error,
	abandoned int) {
	switch {
	case errors.Is(termErr, ErrTermStillRunning):
		e.log.Info("Term returned with work still running; keeping the lease until it expires")
		return
	case abandoned > 0:
		e.log.Info("Writes of the term were still in flight when it ended; keeping the lease "+
			"until it expires", "writes", abandoned)
		return
	}
	e.release(base, c)
}

// drainBound is how long a term's writes in flight are waited for once it
// returned, before the lease is released: the renewal deadline (the lease
// is renewed meanwhile), on the real clock client-go's timers run on.
func (e *Elector) drainBound() time.Duration { return e.onRealClock(e.cfg.RenewDeadline) }

// release gives the lease back if the API server still names this replica
// as its holder. Only called after the term returned and the session ended.
// The write is conditional on the resourceVersion just read, so it never
// clears another replica's lease.
func (e *Elector) release(base context.Context, c *campaign) {
	ctx, cancel := context.WithTimeout(base, e.onRealClock(e.cfg.RenewDeadline))
	defer cancel()
	for {
		rec, _, err := c.lock.Get(ctx)
		if err != nil {
			if !apierrors.IsNotFound(err) {
				e.log.Error(err, "Cannot release the lease: reading it failed")
			}
			return
		}
		if rec.HolderIdentity != e.cfg.Identity {
			return
		}
		now := metav1.NewTime(e.clock.Now())
		err = c.lock.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaseDurationSeconds: 1,
			AcquireTime:          now,
			RenewTime:            now,
			LeaderTransitions:    rec.LeaderTransitions,
			Strategy:             rec.Strategy,
			PreferredHolder:      rec.PreferredHolder,
		})
		switch {
		case err == nil:
			e.log.Info("Released the lease")
			return
		case apierrors.IsConflict(err) && ctx.Err() == nil:
			continue
		default:
			e.log.Error(err, "Cannot release the lease")
			return
		}
	}
}
