package shardgroup

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// leases follows a group's Leases (names starting "<group>-") and when
// this replica saw each change. Lease timestamps are not trusted, as in
// client-go: a Lease has expired when it was seen unchanged for its
// duration by this replica's clock.
type leases struct {
	prefix string
	clock  clock.Clock

	mu       sync.Mutex
	seen     map[string]observed // lease name → its last change seen
	changed  chan struct{}       // signalled (not closed) on any change
	informer cache.SharedIndexInformer
}

type observed struct {
	lease    *coordinationv1.Lease
	holder   string
	record   string // the record's fingerprint
	at       time.Time
	duration time.Duration
}

func (o observed) expiry() time.Time { return o.at.Add(o.duration) }

func newLeases(client kubernetes.Interface, namespace, prefix string, clk clock.Clock) *leases {
	l := &leases{
		prefix:  prefix,
		clock:   clk,
		seen:    map[string]observed{},
		changed: make(chan struct{}, 1),
	}
	f := informers.NewSharedInformerFactoryWithOptions(
		client,
		0,
		informers.WithNamespace(namespace),
	)
	l.informer = f.Coordination().V1().Leases().Informer()
	_, _ = l.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.observe(obj) },
		UpdateFunc: func(_, obj any) { l.observe(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if le, ok := obj.(*coordinationv1.Lease); ok && strings.HasPrefix(le.Name, l.prefix) {
				l.mu.Lock()
				delete(l.seen, le.Name)
				l.mu.Unlock()
				l.signal()
			}
		},
	})
	return l
}

func (l *leases) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *leases) observe(obj any) {
	le, ok := obj.(*coordinationv1.Lease)
	if !ok || !strings.HasPrefix(le.Name, l.prefix) {
		return
	}
	holder := ""
	if le.Spec.HolderIdentity != nil {
		holder = *le.Spec.HolderIdentity
	}
	d := 15 * time.Second
	if le.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*le.Spec.LeaseDurationSeconds) * time.Second
	}
	// The record's fingerprint: a real server changes resourceVersion on
	// every write; a fake clientset leaves it empty, and renewTime tells.
	record := le.ResourceVersion
	if le.Spec.RenewTime != nil {
		record += "/" + le.Spec.RenewTime.String()
	}
	l.mu.Lock()
	prev, ok := l.seen[le.Name]
	if !ok || prev.record != record || prev.holder != holder {
		l.seen[le.Name] = observed{
			lease:    le,
			holder:   holder,
			record:   record,
			at:       l.clock.Now(),
			duration: d,
		}
	}
	l.mu.Unlock()
	l.signal()
}

func (l *leases) run(ctx context.Context) { l.informer.RunWithContext(ctx) }

func (l *leases) synced() bool { return l.informer.HasSynced() }

// holders returns the holders of the unexpired Leases whose names start
// with prefix, sorted, and the first moment one of prefix's held Leases
// expires (zero if none will).
func (l *leases) holders(prefix string) ([]string, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	var out []string
	var next time.Time
	for name, o := range l.seen {
		if !strings.HasPrefix(name, prefix) || o.holder == "" {
			continue
		}
		if !now.Before(o.expiry()) {
			continue
		}
		out = append(out, o.holder)
		if next.IsZero() || o.expiry().Before(next) {
			next = o.expiry()
		}
	}
	slices.Sort(out)
	return slices.Compact(out), next
}

// expired returns the Lease called name if it is held and was seen
// unchanged for its whole duration.
func (l *leases) expired(name string) (*coordinationv1.Lease, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.seen[name]
	if !ok || o.holder == "" || l.clock.Now().Before(o.expiry()) {
		return nil, false
	}
	return o.lease, true
}
