//go:build integration

package integration

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/fence"
	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
)

// leasePartition fails this replica's lease updates while on is set, as a
// network partition between it and the API server would, while its other
// requests go through: the worst case for fencing, since the controller can
// still reach the API server.
type leasePartition struct {
	on   *atomic.Bool
	next http.RoundTripper
}

func (p leasePartition) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.on.Load() && r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/leases/") {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, errors.New("injected partition: lease update dropped")
	}
	return p.next.RoundTrip(r)
}

// writeAttempt is one write a controller tried.
type writeAttempt struct {
	at      time.Time
	latency time.Duration
	rv      int64 // resourceVersion the API server gave, when it succeeded
	err     error
}

// stubbornWriter updates ConfigMap "fence-target" every few milliseconds
// through its term's client, ignoring its context until stop is closed.
type stubbornWriter struct {
	ns, replica string
	stop        chan struct{}
	done        chan struct{}
	mu          sync.Mutex
	attempts    []writeAttempt
}

func (w *stubbornWriter) descriptor() descriptor.Descriptor {
	return descriptor.New("fenced-writer-controller", func(_ context.Context, cc descriptor.Context) (descriptor.Controller, error) {
		client, err := cc.ClientBuilder.Client(cc.Name)
		if err != nil {
			return nil, err
		}
		return descriptor.ControllerFunc(func(context.Context) error {
			defer close(w.done)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for seq := 0; ; seq++ {
				select {
				case <-w.stop:
					return nil
				case <-tick.C:
				}
				// Deliberately not the term's context: this controller
				// ignores cancellation, as a buggy one would.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				start := time.Now()
				cm, err := client.CoreV1().ConfigMaps(w.ns).Update(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: "fence-target", Namespace: w.ns},
					Data:       map[string]string{"writer": w.replica, "seq": strconv.Itoa(seq)},
				}, metav1.UpdateOptions{})
				cancel()
				a := writeAttempt{at: start, latency: time.Since(start), err: err}
				if err == nil {
					a.rv, _ = strconv.ParseInt(cm.ResourceVersion, 10, 64)
				}
				w.mu.Lock()
				w.attempts = append(w.attempts, a)
				w.mu.Unlock()
			}
		}), nil
	})
}

func (w *stubbornWriter) snapshot() []writeAttempt {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.attempts)
}

// TestFencedWritesAfterLostLease: a controller that ignores cancellation
// and keeps writing after its replica lost the lease gets ErrFenced, and
// the API server records no write from it after the lease was lost: every
// write it got accepted precedes, in etcd's order, the first write of the
// replica that took over.
func TestFencedWritesAfterLostLease(t *testing.T) {
	env := sharedEnv(t)
	admin := clientset(t, env.Config())
	ns := namespace(t, admin)
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "fence-target"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lease := "fence-" + ns
	opts := func(identity string) manager.Options {
		return manager.Options{
			Serving:     serving.Options{SecurePort: -1},
			LeaderElect: true,
			LeaderElection: leader.Config{
				Name:          lease,
				Identity:      identity,
				LeaseDuration: 3 * time.Second,
				RenewDeadline: 1400 * time.Millisecond,
				RetryPeriod:   300 * time.Millisecond,
			},
			ControllerShutdownTimeout: 5 * time.Second,
		}
	}

	// Replica a: its lease updates can be cut.
	var partitioned atomic.Bool
	cfgA := rest.CopyConfig(env.Config())
	cfgA.Wrap(func(rt http.RoundTripper) http.RoundTripper { return leasePartition{on: &partitioned, next: rt} })
	a := &stubbornWriter{ns: ns, replica: "a", stop: make(chan struct{}), done: make(chan struct{})}
	defer func() {
		close(a.stop)
		select {
		case <-a.done:
		case <-time.After(time.Minute):
			t.Error("the stubborn writer did not stop")
		}
	}()
	ma, err := manager.NewBuilder("fence-manager").WithRESTConfig(cfgA).WithOptions(opts("a")).
		WithLogger(testr.NewWithOptions(t, testr.Options{LogTimestamp: true}).WithName("a")).Register(a.descriptor()).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctxA, cancelA := context.WithCancel(t.Context())
	defer cancelA()
	doneA := make(chan error, 1)
	go func() { doneA <- ma.Run(ctxA) }()

	accepted := func(w *stubbornWriter) int {
		n := 0
		for _, x := range w.snapshot() {
			if x.err == nil {
				n++
			}
		}
		return n
	}
	poll.UntilContext(t, "a writes",
		func(context.Context) (bool, error) { return accepted(a) >= 5, nil })

	partitioned.Store(true)
	cut := time.Now()
	poll.UntilContext(t, "a's writes are fenced", func(context.Context) (bool, error) {
		s := a.snapshot()
		return len(s) > 0 && errors.Is(s[len(s)-1].err, fence.ErrFenced), nil
	})
	select {
	case err := <-doneA:
		if !errors.Is(err, leader.ErrLeaseLost) {
			t.Errorf("a: Run = %v, want ErrLeaseLost", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a: Run did not return after losing the lease")
	}

	// Replica b takes over and writes once.
	b := &stubbornWriter{ns: ns, replica: "b", stop: make(chan struct{}), done: make(chan struct{})}
	mb, err := manager.NewBuilder("fence-manager").WithRESTConfig(env.Config()).WithOptions(opts("b")).
		WithLogger(testr.NewWithOptions(t, testr.Options{LogTimestamp: true}).WithName("b")).Register(b.descriptor()).Build()
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, mb)
	defer func() { close(b.stop) }()
	poll.UntilContext(t, "b writes",
		func(context.Context) (bool, error) { return accepted(b) >= 3, nil })
	// a goes on trying while b writes.
	aTriesBefore := len(a.snapshot())
	poll.UntilContext(t, "a tries again while b leads", func(context.Context) (bool, error) {
		return len(a.snapshot()) > aTriesBefore+5, nil
	})

	var bFirst int64
	for _, x := range b.snapshot() {
		if x.err == nil {
			bFirst = x.rv
			break
		}
	}
	var lastAccepted writeAttempt
	var firstFenced time.Time
	var latencies []time.Duration
	for _, x := range a.snapshot() {
		switch {
		case x.err == nil:
			if x.rv >= bFirst {
				t.Errorf("a's write at %v was accepted at resourceVersion %d, after b's first write at %d", x.at, x.rv, bFirst)
			}
			if !firstFenced.IsZero() {
				t.Errorf("a's write at %v was accepted after an earlier one was fenced at %v", x.at, firstFenced)
			}
			lastAccepted = x
			latencies = append(latencies, x.latency)
		case errors.Is(x.err, fence.ErrFenced):
			if firstFenced.IsZero() {
				firstFenced = x.at
				for _, want := range []string{`"fenced-writer-controller"`, lease, "identity a"} {
					if !strings.Contains(x.err.Error(), want) {
						t.Errorf("fenced error %q does not name %s", x.err, want)
					}
				}
			}
		default:
			t.Errorf("a's write at %v failed with %v, want success or ErrFenced", x.at, x.err)
		}
	}
	slices.Sort(latencies)
	t.Logf("partition at +0; a's last accepted write sent at +%v; first fenced at +%v; b's first write at rv %d; accepted write latency median %v max %v (the residual window is one request in flight)",
		lastAccepted.at.Sub(cut).Round(time.Millisecond), firstFenced.Sub(cut).Round(time.Millisecond), bFirst,
		latencies[len(latencies)/2], latencies[len(latencies)-1])
}
