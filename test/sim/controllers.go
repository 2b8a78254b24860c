package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/shard"
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// gadgetsGVR is the custom resource WhenServed controllers wait for.
var gadgetsGVR = schema.GroupVersionResource{
	Group: "sim.ctrlhost.io", Version: "v1", Resource: "gadgets",
}

// descriptor is the replica's copy of a simulated controller.
func (r *replica) descriptor(s ControllerSpec) descriptor.Descriptor {
	rng := rand.New(rand.NewPCG(r.w.cfg.Seed, uint64(r.slot)<<32|uint64(len(r.identity))))
	d := descriptor.New(s.Name, func(ctx context.Context,
		cc descriptor.Context) (descriptor.Controller, error) {
		if err := r.init(ctx, s, rng); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, nil // the term stopped while this InitFunc waited
		}
		cs, err := cc.ClientBuilder.Client(s.Name)
		if err != nil {
			return nil, err
		}
		w := r.w
		c := &controller{r: r, spec: s, client: cs, events: cc.EventRecorder, key: s.Name,
			term: leader.TermFrom(ctx), queues: cc.Queues, clients: cc.ClientBuilder}
		shared := cc.InformerFactory.Core().V1().ConfigMaps().Informer()
		if s.Index {
			if err := shared.AddIndexers(cache.Indexers{writerIndex: byWriter}); err != nil {
				return nil, err
			}
		}
		own := cc.NamespacedInformerFactory("own-" + s.Name).Core().V1().ConfigMaps().Informer()
		c.informers = []cache.SharedIndexInformer{shared, own}
		if s.Served {
			gadgets := cc.DynamicInformerFactory.ForResource(gadgetsGVR).Informer()
			c.informers = append(c.informers, gadgets)
		}
		if s.Declines && decline(rng, &r.mu) {
			// As node-ipam without --allocate-node-cidrs: it requested its
			// informers, and chooses not to start; the host must let go of
			// what only it holds.
			for i, inf := range c.informers {
				w.holds(r.identity, s.Name+" (declined)", inf, false, c.term, i == 0)
			}
			return nil, nil
		}
		w.checkShared(r.identity, c.term, s, shared)
		for i, inf := range c.informers {
			w.holds(r.identity, s.Name, inf, true, c.term, i == 0)
		}
		c.namespaces = []string{namespaces[hashOf(s.Name)%uint32(len(namespaces))]}
		if sc := cc.Shard; sc != nil {
			c.key = fmt.Sprintf("%s/%v", s.Name, sc.Slots)
			c.namespaces = nil
			for _, ns := range namespaces {
				if containsInt(sc.Slots, sc.Space.SlotOfKey(ns)) {
					c.namespaces = append(c.namespaces, ns)
				}
			}
		}
		return c, nil
	})
	switch s.Reads {
	case ReadsWhole:
		d = d.WithInformers(configMapsGVR)
	case ReadsData:
		d = d.WithInformers(configMapsGVR).WithReads(configMapsGVR, "data")
	case ReadsMetadata:
		d = d.WithInformers(configMapsGVR).WithReads(configMapsGVR)
	}
	if s.Sharded {
		d = d.Sharded(shard.ByNamespace)
	}
	if s.Served {
		d = d.WhenServed(gadgetsGVR)
	}
	return d
}

// writerIndex is the index Index controllers add: ConfigMaps by writer.
const writerIndex = "sim.ctrlhost.io/writer"

func byWriter(obj any) ([]string, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, nil
	}
	return []string{cm.Data["writer"]}, nil
}

// decline draws whether a Declines controller's InitFunc declines this
// time: one start in two.
func decline(rng *rand.Rand, mu *sync.Mutex) bool {
	mu.Lock()
	defer mu.Unlock()
	return rng.IntN(2) == 0
}

func hashOf(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// init plays the InitFunc's behaviour.
func (r *replica) init(ctx context.Context, s ControllerSpec, rng *rand.Rand) error {
	switch s.Init {
	case InitBlockCtx:
		t := time.NewTimer(s.InitTime)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	case InitBlockHard:
		time.Sleep(s.InitTime) // ignores its context, as a misbehaving InitFunc does
	case InitFlaky:
		r.mu.Lock()
		n := rng.IntN(8)
		r.mu.Unlock()
		switch n {
		case 0:
			return errors.New("simulated InitFunc failure")
		case 1:
			panic("simulated InitFunc panic")
		}
	}
	return nil
}

// controller writes a ConfigMap per namespace it owns every period, and an
// event now and then, until its context is done; then it stops as its spec
// says.
type controller struct {
	r          *replica
	spec       ControllerSpec
	client     kubernetes.Interface
	events     record.EventRecorder
	key        string
	namespaces []string
	n          int
	term       *leader.Term // the lease the controller runs under
	// informers are those its InitFunc requested: each must stop soon
	// after the Run of the last controller holding it returned.
	informers []cache.SharedIndexInformer
	queues    descriptor.Queues
	clients   descriptor.ClientBuilder // Lazy: a client is built before each write
}

// fenced reports whether the controller's term refuses its writes.
func (c *controller) fenced() bool { return c.term.Gate().Check(c.spec.Name) != nil }

func (c *controller) Run(ctx context.Context) error {
	w := c.r.w
	for _, inf := range c.informers {
		defer w.mustStop(c.key, inf)
	}
	if ctx.Err() != nil {
		return nil // called with a done context: its term ended before it started
	}
	in := w.started(c.key, c.r.identity, c.fenced, len(c.namespaces) == 0)
	in.gate = c.term.Gate()
	defer w.stopped(c.key, in)
	mail := w.keys != nil && w.keys.takes(c.spec)
	if mail {
		w.keys.take(ctx, c.r.identity, c.term, c.spec.Name, c.queues)
	}
	tick := time.NewTicker(c.spec.Period)
	defer tick.Stop()
	wctx, stop := ctx, ctx.Done()
	for {
		select {
		case <-tick.C:
			c.write(wctx)
			if mail {
				w.keys.send(c.r.identity, c.term, c.spec.Name, c.queues)
			}
		case <-stop:
			if wctx != ctx {
				return nil // the run ended
			}
			w.toldToStop(in)
			switch c.spec.Stop {
			case StopFast:
				return nil
			case StopSlow:
				time.Sleep(c.spec.StopTime) // the work it must finish
				return nil
			}
			// StopNever: goes on writing, on a context of its own, until
			// the run ends; every write must be fenced.
			wctx, stop = w.released, w.release
		}
	}
}

// write creates or updates the controller's ConfigMaps, and records an
// event about each every third time, whether the write went through or not
// (a controller reports what it tried).
func (c *controller) write(ctx context.Context) {
	c.n++
	if c.spec.Lazy {
		if cs, err := c.clients.Client(c.spec.Name); err == nil {
			c.client = cs
		}
	}
	for _, ns := range c.namespaces {
		if c.n%3 == 0 {
			ref := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.spec.Name, Namespace: ns,
				UID: "sim"}}
			c.events.Eventf(ref, corev1.EventTypeNormal, "Writing", "write %d by %s", c.n, c.r.identity)
		}
		cms := c.client.CoreV1().ConfigMaps(ns)
		cm, err := cms.Get(ctx, c.spec.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.spec.Name, Namespace: ns}}
			cm.Data = map[string]string{"writer": c.r.identity, "n": strconv.Itoa(c.n)}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		case err == nil:
			cm.Data = map[string]string{"writer": c.r.identity, "n": strconv.Itoa(c.n)}
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		_ = err // conflicts, fenced writes and partitions are the simulation's weather
	}
}
