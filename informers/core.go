package informers

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/ctrlhost/ctrlhost/informers/internal/prune"
)

// core is what every view of a Set shares: its clients and options, and
// its informers, each with the users that hold it.
//
// An informer starts at the first Start after it was requested and runs
// until its last user releases it or the Set shuts down, each on a context
// of its own under the Set's, so that one can stop while the others go on.
type core struct {
	client   kubernetes.Interface
	metadata metadata.Interface
	dynamic  dynamic.Interface
	resync   time.Duration
	strip    bool
	intern   bool
	plans    plans
	expected []string                         // Options.Anticipate
	requests map[string]map[reflect.Type]bool // Options.Informers, by Go type

	mu        sync.Mutex
	wants     map[wantKey]*prune.Plan // wantLocked's answers, made once
	entries   map[key]*entry
	variants  map[key]int               // by key of variant 0: how many variant numbers were used
	handlers  map[string][]registration // by holder
	factories []*added
	holders   int             // how many views For made, for their names
	runCtx    context.Context // nil before the first Start
	cancelRun context.CancelFunc
	down      bool // Shutdown was called: nothing starts any more
	wg        sync.WaitGroup
}

// Holders are named "<user>#<n>"; the Set itself is "". The functions
// below take a holder where they say user.

// kind says which factory an informer belongs to.
type kind int

const (
	typedKind kind = iota
	metadataKind
	dynamicKind
	customKind
)

// key names one informer of a Set.
type key struct {
	kind      kind
	namespace string                      // typed: its factory's namespace ("" for all)
	typ       reflect.Type                // typed: the object's type; custom: T
	gvr       schema.GroupVersionResource // metadata, dynamic, custom
	// variant tells apart typed informers of one type that keep different
	// fields (acquire): 0 is the first.
	variant int
}

// String names the informer in errors, as readiness reports it.
func (k key) String() string {
	if k.variant > 0 {
		base := k
		base.variant = 0
		return fmt.Sprintf("%v (#%d)", base, k.variant+1)
	}
	switch k.kind {
	case metadataKind:
		return "metadata " + k.gvr.String()
	case dynamicKind:
		return "dynamic " + k.gvr.String()
	case customKind:
		return fmt.Sprintf("custom %v %v", k.gvr, k.typ)
	}
	if k.namespace != "" {
		return "namespace " + k.namespace + " " + k.typ.String()
	}
	return k.typ.String()
}

// entry is one informer of the Set and who holds it.
type entry struct {
	key
	inf     cache.SharedIndexInformer
	generic kinformers.GenericInformer // metadata and dynamic: the informer with its lister
	plan    *prune.Plan                // typed: the fields it keeps; fixed once it runs
	users   map[string]bool
	cancel  context.CancelFunc // set once it runs
	done    chan struct{}      // closed once it returned; nil before it runs
	// indexMu serialises the indexes its holders add (addIndexers): the
	// informer's indexer hands out its index map unlocked.
	indexMu sync.Mutex
}

// added is a factory a user added (AddFactory).
type added struct {
	f      Factory
	user   string
	cancel context.CancelFunc // set once started
}

// view returns a new holder named user, or the Set itself for "".
func (c *core) view(user string) *Set {
	holder := ""
	if user != "" {
		c.mu.Lock()
		c.holders++
		holder = fmt.Sprintf("%s#%d", user, c.holders)
		c.mu.Unlock()
	}
	return &Set{c: c, user: user, holder: holder, started: make(chan struct{}),
		namespaced: map[string]*typedFactory{}}
}

// acquire returns the Set's informer k, made by mk when the Set has none
// that serves holder, and counts holder among its users.
//
// A typed informer keeps only the fields its holders read (plans). Of the
// variants of k the Set has (informers of one type that keep different
// fields), holder gets the first that keeps every field it reads, started
// or not; else the first not started yet, widened to what holder reads;
// else a new variant of its own, that starts at the next Start. A holder
// that comes back (a controller restarted, a WhenServed one whose
// resources came back) thus shares whichever variant covers it, even when
// the variant it got before is gone.
func (c *core) acquire(k key, holder string,
	mk func() (cache.SharedIndexInformer, kinformers.GenericInformer)) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var want *prune.Plan
	if k.kind == typedKind {
		want = c.wantLocked(holder, k.typ)
	}
	var variants []*entry
	free := -1 // the first variant number not in use
	for v := 0; v < c.variants[k]; v++ {
		kv := k
		kv.variant = v
		if e, ok := c.entries[kv]; ok {
			variants = append(variants, e)
		} else if free < 0 {
			free = v
		}
	}
	pick := func() *entry {
		for _, e := range variants {
			if want == nil || e.plan.Covers(want) {
				return e
			}
		}
		for _, e := range variants {
			if e.done == nil {
				e.plan = e.plan.Union(want)
				return e
			}
		}
		return nil
	}
	if e := pick(); e != nil {
		e.users[holder] = true
		return e
	}
	if free < 0 {
		free = c.variants[k]
		c.variants[k]++
	}
	k.variant = free
	inf, gi := mk()
	e := &entry{key: k, inf: inf, generic: gi, plan: want, users: map[string]bool{}}
	if k.kind != customKind {
		// Fails only on a running informer, and this one is new.
		_ = inf.SetTransform(c.transform(e))
	}
	c.entries[k] = e
	e.users[holder] = true
	return e
}

// wantKey names what one user reads of one type.
type wantKey struct {
	user string
	typ  reflect.Type
}

// wantLocked is what an informer of typ (a pointer type) made for holder
// keeps: what its user reads, and what the anticipated users declared
// they read of typ. It is worked out once per user and type (accessors
// ask for their informer on every call); c.mu is held.
func (c *core) wantLocked(holder string, typ reflect.Type) *prune.Plan {
	k := wantKey{userOf(holder), typ}
	if p, ok := c.wants[k]; ok {
		return p
	}
	p := c.plans.planFor(holder, typ)
	for _, u := range c.expected {
		switch d := c.plans.declared(u, typ); {
		case d != nil:
			p = p.Union(d)
		case c.mayRequest(u, typ):
			// It did not say what it reads of typ: it reads it whole.
			p = prune.All(typ.Elem())
		}
	}
	c.wants[k] = p
	return p
}

// mayRequest reports whether user may request a typed informer of typ (a
// pointer type): unless it declared its informers (Options.Informers) and
// none is of typ.
func (c *core) mayRequest(user string, typ reflect.Type) bool {
	types, ok := c.requests[user]
	return !ok || types[typ.Elem()]
}

// typesOf maps each user's declared informers to the Go types of their
// typed informers; a user that declared none is left out (it may request
// any).
func typesOf(declared map[string][]schema.GroupVersionResource) map[string]map[reflect.Type]bool {
	out := map[string]map[reflect.Type]bool{}
	for user, gvrs := range declared {
		if len(gvrs) == 0 {
			continue
		}
		types := map[reflect.Type]bool{}
		for _, gvr := range gvrs {
			if r, ok := typedResources()[gvr]; ok {
				types[r.typ] = true
			}
		}
		out[user] = types
	}
	return out
}

// addFactory adds f for user, started at once if the Set runs.
func (c *core) addFactory(f Factory, user string) {
	a := &added{f: f, user: user}
	c.mu.Lock()
	c.factories = append(c.factories, a)
	start := c.runCtx != nil && !c.down
	var stop <-chan struct{}
	if start {
		stop = c.runAddedLocked(a)
	}
	c.mu.Unlock()
	if start {
		f.Start(stop)
	}
}

// runAddedLocked gives a its stop channel (closed when it is released or
// the Set stops); c.mu is held.
func (c *core) runAddedLocked(a *added) <-chan struct{} {
	ctx, cancel := context.WithCancel(c.runCtx)
	a.cancel = cancel
	return ctx.Done()
}

// start gives the Set its lifetime on the first call (until stop closes or
// Shutdown), and starts every informer and added factory not started yet.
func (c *core) start(stop <-chan struct{}) {
	c.mu.Lock()
	if c.down {
		c.mu.Unlock()
		return
	}
	if c.runCtx == nil {
		c.runCtx, c.cancelRun = context.WithCancel(context.Background())
		ctx, cancel := c.runCtx, c.cancelRun
		c.wg.Go(func() {
			select {
			case <-stop:
			case <-ctx.Done():
			}
			cancel()
		})
	}
	for _, e := range c.entries {
		if e.done == nil {
			c.runLocked(e)
		}
	}
	type toStart struct {
		f    Factory
		stop <-chan struct{}
	}
	var fs []toStart
	for _, a := range c.factories {
		if a.cancel == nil {
			fs = append(fs, toStart{a.f, c.runAddedLocked(a)})
		}
	}
	c.mu.Unlock()
	for _, f := range fs {
		f.f.Start(f.stop)
	}
}

// runLocked runs e on a context of its own; c.mu is held.
func (c *core) runLocked(e *entry) {
	ctx, cancel := context.WithCancel(c.runCtx)
	e.cancel, e.done = cancel, make(chan struct{})
	inf, done := e.inf, e.done
	c.wg.Go(func() {
		defer close(done)
		inf.RunWithContext(ctx)
	})
}

// release forgets user: the event handlers it added are removed, the
// informers it alone held are stopped, waited for and dropped, and the
// factories it added are shut down.
func (c *core) release(user string) {
	c.mu.Lock()
	regs := c.handlers[user]
	delete(c.handlers, user)
	var stopping []*entry
	for k, e := range c.entries {
		if !e.users[user] {
			continue
		}
		delete(e.users, user)
		if len(e.users) == 0 {
			delete(c.entries, k)
			stopping = append(stopping, e)
		}
	}
	var fs []*added
	c.factories = slices.DeleteFunc(c.factories, func(a *added) bool {
		if a.user == user {
			fs = append(fs, a)
			return true
		}
		return false
	})
	c.mu.Unlock()
	for _, r := range regs {
		// client-go refuses only a handle it did not make, and forgets
		// one already removed.
		_ = r.inf.RemoveEventHandler(r.reg)
	}
	for _, e := range stopping {
		if e.cancel != nil {
			e.cancel()
			<-e.done
		}
	}
	for _, a := range fs {
		if a.cancel != nil {
			a.cancel()
		}
		a.f.Shutdown()
	}
}

// shutdown stops every informer and added factory and waits for them.
func (c *core) shutdown() {
	c.mu.Lock()
	c.down = true
	cancel := c.cancelRun
	fs := slices.Clone(c.factories)
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	c.wg.Wait()
	for _, a := range fs {
		a.f.Shutdown()
	}
}

// pending waits until every started informer user holds (every one, for
// "") has synced or ctx is done, and names those that have not.
func (c *core) pending(ctx context.Context, user string) []string {
	c.mu.Lock()
	var es []*entry
	for _, e := range c.entries {
		if e.done != nil && (user == "" || e.users[user]) {
			es = append(es, e)
		}
	}
	var fs []Factory
	for _, a := range c.factories {
		if a.cancel != nil && (user == "" || a.user == user) {
			fs = append(fs, a.f)
		}
	}
	c.mu.Unlock()
	var out []string
	if ctx.Err() == nil {
		checkers := make([]cache.DoneChecker, 0, len(es))
		for _, e := range es {
			checkers = append(checkers, e.inf.HasSyncedChecker())
		}
		cache.WaitFor(ctx, "", checkers...)
	}
	for _, e := range es {
		if !e.inf.HasSynced() {
			out = append(out, e.key.String())
		}
	}
	for _, f := range fs {
		for t, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				out = append(out, t.String())
			}
		}
	}
	slices.Sort(out)
	return out
}

// startedOf returns the started informers of the kind and namespace, for
// the factories' WaitForCacheSync.
func (c *core) startedOf(k kind, namespace string) []*entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*entry
	for _, e := range c.entries {
		if e.kind == k && e.namespace == namespace && e.done != nil {
			out = append(out, e)
		}
	}
	return out
}

// waitSynced waits until each of es has synced or stop closes, and
// reports which have.
func waitSynced(stop <-chan struct{}, es []*entry) map[*entry]bool {
	ctx := wait.ContextForChannel(stop)
	checkers := make([]cache.DoneChecker, 0, len(es))
	for _, e := range es {
		checkers = append(checkers, e.inf.HasSyncedChecker())
	}
	cache.WaitFor(ctx, "", checkers...)
	out := make(map[*entry]bool, len(es))
	for _, e := range es {
		out[e] = e.inf.HasSynced()
	}
	return out
}
