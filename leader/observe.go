package leader

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// leaseState is the newest state of the Lease this replica has seen, from
// the watch or from client-go's own requests.
type leaseState struct {
	known  bool // observed at least once
	exists bool
	spec   coordinationv1.LeaseSpec
	rv     int64 // resourceVersion, when it parses as an integer
	hasRV  bool
	seenAt time.Time // when spec was first seen
	gen    uint64    // bumped whenever spec or existence changes
}

func (st *leaseState) holder() string {
	if !st.exists || st.spec.HolderIdentity == nil {
		return ""
	}
	return *st.spec.HolderIdentity
}

type source int

const (
	fromWatch source = iota
	fromGet          // a Get by client-go's LeaderElector or by release
	fromWrite        // a successful Create or Update
)

func specEqual(a, b *coordinationv1.LeaseSpec) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// observe records a state of the Lease; lease is nil when it does not exist.
// Responses can arrive out of order (a watch event after a newer Get), so
// states with an older resourceVersion are ignored: resourceVersions are
// opaque in general, but the API server's, and the fake's under
// leadertest.EnforceResourceVersion, are increasing integers. Without them
// every state is taken as it comes.
func (e *Elector) observe(c *campaign, lease *coordinationv1.Lease, src source) {
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.notifyChanged()

	if c != nil {
		c.see(lease, src, now)
	}
	if src == fromGet && c != nil && (lease == nil || lease.Spec.HolderIdentity == nil ||
		*lease.Spec.HolderIdentity == "") {
		// The session read the lease as free and acts on it at once: no
		// early attempt for this state (set once it is recorded, below).
		defer func() { e.pokedGen = e.lease.gen }()
	}

	st := &e.lease
	var rv int64
	hasRV := false
	if lease != nil {
		if v, err := strconv.ParseInt(lease.ResourceVersion, 10, 64); err == nil {
			rv, hasRV = v, true
		}
	}
	if hasRV && st.hasRV && rv < st.rv {
		return
	}
	prevKnown, prevHolder := st.known, st.holder()
	switch {
	case lease == nil:
		if st.exists || !st.known {
			st.exists, st.spec, st.seenAt = false, coordinationv1.LeaseSpec{}, now
			st.gen++
		}
	default:
		if hasRV {
			st.rv, st.hasRV = rv, true
		}
		if !st.exists || !st.known || !specEqual(&st.spec, &lease.Spec) {
			st.exists, st.spec, st.seenAt = true, *lease.Spec.DeepCopy(), now
			st.gen++
		}
	}
	st.known = true

	if h := st.holder(); !prevKnown {
		e.log.Info("Observed the lease", "holder", h)
	} else if h != prevHolder {
		e.log.Info("Leader changed", "from", prevHolder, "to", h)
	}
}

func (e *Elector) notifyChanged() {
	select {
	case e.changed <- struct{}{}:
	default:
	}
}

// see mirrors how client-go's LeaderElector times the lease: it restarts
// its expiry clock when a Get returns a record different from the previous
// Get's, and when its own write succeeds.
func (c *campaign) see(lease *coordinationv1.Lease, src source, now time.Time) {
	switch src {
	case fromGet:
		if lease == nil {
			return
		}
		if c.lastGet == nil || !specEqual(c.lastGet, &lease.Spec) {
			spec := lease.Spec.DeepCopy()
			c.lastGet = spec
			c.view, c.viewAt, c.viewKnown = *spec, now, true
		}
	case fromWrite:
		if lease != nil {
			c.view, c.viewAt, c.viewKnown = *lease.Spec.DeepCopy(), now, true
		}
	}
}

// leasesGetter hands client-go's LeaseLock a Lease client that reports what
// it reads and writes, and bounds each request by RenewDeadline as KCM does
// with its lock client's timeout.
type leasesGetter struct {
	e *Elector
	c *campaign
}

func (g leasesGetter) Leases(namespace string) coordinationv1client.LeaseInterface {
	return leaseClient{
		LeaseInterface: g.e.client.CoordinationV1().Leases(namespace),
		e:              g.e,
		c:              g.c,
	}
}

type leaseClient struct {
	coordinationv1client.LeaseInterface
	e *Elector
	c *campaign
}

// out counts a request of the campaign's session from now until the
// returned function is called, which also has the campaign judge the
// lease again.
func (l leaseClient) out() (back func()) {
	if l.c == nil {
		return func() {}
	}
	l.e.mu.Lock()
	l.c.inflight++
	l.e.mu.Unlock()
	return func() {
		l.e.mu.Lock()
		l.c.inflight--
		l.e.mu.Unlock()
		l.e.notifyChanged()
	}
}

func (l leaseClient) Get(
	ctx context.Context,
	name string,
	opts metav1.GetOptions,
) (*coordinationv1.Lease, error) {
	defer l.out()()
	ctx, cancel := context.WithTimeout(ctx, l.e.onRealClock(l.e.cfg.RenewDeadline))
	defer cancel()
	lease, err := l.LeaseInterface.Get(ctx, name, opts)
	switch {
	case err == nil:
		l.e.observe(l.c, lease, fromGet)
	case apierrors.IsNotFound(err):
		l.e.observe(l.c, nil, fromGet)
	}
	return lease, err
}

func (l leaseClient) Create(
	ctx context.Context,
	lease *coordinationv1.Lease,
	opts metav1.CreateOptions,
) (*coordinationv1.Lease, error) {
	defer l.out()()
	ctx, cancel := context.WithTimeout(ctx, l.e.onRealClock(l.e.cfg.RenewDeadline))
	defer cancel()
	start := l.e.clock.Now()
	out, err := l.LeaseInterface.Create(ctx, lease, opts)
	if err == nil {
		l.wrote(ctx, out, start)
	} else {
		l.failed(lease, err)
	}
	return out, err
}

func (l leaseClient) Update(
	ctx context.Context,
	lease *coordinationv1.Lease,
	opts metav1.UpdateOptions,
) (*coordinationv1.Lease, error) {
	defer l.out()()
	ctx, cancel := context.WithTimeout(ctx, l.e.onRealClock(l.e.cfg.RenewDeadline))
	defer cancel()
	start := l.e.clock.Now()
	out, err := l.LeaseInterface.Update(ctx, lease, opts)
	if err == nil {
		l.wrote(ctx, out, start)
	} else {
		l.failed(lease, err)
	}
	return out, err
}

// failed records a write naming this replica whose outcome is unknown: the
// request failed without an answer from the API server (a cancelled or
// timed-out request, a broken connection), so the server may have applied
// it. A campaign with such a write may hold the lease without knowing it
// (a later session of it finds out with its first read, but the campaign
// may end before that).
func (l leaseClient) failed(lease *coordinationv1.Lease, err error) {
	var status apierrors.APIStatus
	if errors.As(err, &status) || lease.Spec.HolderIdentity == nil ||
		*lease.Spec.HolderIdentity != l.e.cfg.Identity {
		return
	}
	l.c.uncertain.Store(true)
}

// wrote records a successful write of the lease whose request started at
// start. A write naming this replica renews the running term's write fence:
// the API server accepted it no earlier than start.
func (l leaseClient) wrote(ctx context.Context, lease *coordinationv1.Lease, start time.Time) {
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == l.e.cfg.Identity {
		l.e.mu.Lock()
		l.e.lastRenew = l.e.clock.Now()
		if start.After(l.e.renewStart) {
			l.e.renewStart = start
			// client-go followers see a renewal only when the renewTime's
			// second changes (they compare the record in JSON, whole
			// seconds): the expiry counts from the first write of the
			// newest second.
			sec := int64(-1)
			if rt := lease.Spec.RenewTime; rt != nil {
				sec = rt.Unix()
			}
			if sec != l.e.anchorSecond || l.e.anchor.IsZero() {
				l.e.anchor, l.e.anchorSecond = start, sec
			}
		}
		l.e.gate.Extend(l.e.gateUntil())
		l.e.mu.Unlock()
		// client-go's acquire returns true, and so starts OnStartedLeading,
		// exactly when such a write succeeded in its session.
		if s := sessionFrom(ctx); s != nil {
			s.acquired.Store(true)
		}
	}
	l.e.observe(l.c, lease, fromWrite)
}

// watch follows the Lease with an informer on that one object and returns a
// function that stops it and waits until it stopped. When the API server
// forbids the list or watch (KCM's RBAC role only grants get and update on
// its Lease), the watch stops and followers rely on client-go's polling
// every RetryPeriod and on the expiry timer.
func (e *Elector) watch(base context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(base)
	leases := e.client.CoordinationV1().Leases(e.cfg.Namespace)
	selector := fields.OneTermEqualSelector("metadata.name", e.cfg.Name).String()
	giveUp := func(err error) {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			e.watchForbidden.Store(true)
			e.log.Info(
				"Cannot watch the lease; handoff falls back to polling every RetryPeriod. Grant list and "+
					"watch on this Lease for fast handoff",
				"err",
				err.Error(),
			)
			cancel()
		}
	}
	// client-go's reflector returns from Run without waiting for a list it
	// started on a goroutine of its own; calls are counted so that stop
	// waits for those in flight, and once stop has begun none may start.
	var (
		mu       sync.Mutex
		stopped  bool
		inflight sync.WaitGroup
	)
	enter := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return false
		}
		inflight.Add(1)
		return true
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if !enter() {
				return nil, context.Canceled
			}
			defer inflight.Done()
			opts.FieldSelector = selector
			list, err := leases.List(ctx, opts)
			if err != nil {
				giveUp(err)
			}
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context,
			opts metav1.ListOptions) (watch.Interface, error) {
			if !enter() {
				return nil, context.Canceled
			}
			defer inflight.Done()
			opts.FieldSelector = selector
			w, err := leases.Watch(ctx, opts)
			if err != nil {
				giveUp(err)
			}
			return w, err
		},
	}
	handle := func(obj any) {
		if lease, ok := obj.(*coordinationv1.Lease); ok && lease.Name == e.cfg.Name &&
			lease.Namespace == e.cfg.Namespace {
			e.observe(nil, lease, fromWatch)
		}
	}
	logger := klog.FromContext(base).WithName("lease-watch")
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger:        &logger,
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, e.client),
		ObjectType:    &coordinationv1.Lease{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    handle,
			UpdateFunc: func(_, obj any) { handle(obj) },
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if lease, ok := obj.(*coordinationv1.Lease); ok && lease.Name == e.cfg.Name &&
					lease.Namespace == e.cfg.Namespace {
					e.observe(nil, nil, fromWatch)
				}
			},
		},
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		informer.RunWithContext(ctx)
	}()
	return func() {
		cancel()
		<-done
		if afterLeaseWatchRun != nil {
			afterLeaseWatchRun()
		}
		mu.Lock()
		stopped = true
		mu.Unlock()
		inflight.Wait()
	}
}

// afterLeaseWatchRun, when set (by a test), runs between the lease
// informer's return and the wait for its calls in flight.
var afterLeaseWatchRun func()
