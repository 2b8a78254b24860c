package workloop_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ctrlhost/ctrlhost/workloop"
)

// fakeStore is an informer store whose last synced resourceVersion the test sets.
type fakeStore struct{ rv atomic.Value }

func (f *fakeStore) LastStoreSyncResourceVersion() string { s, _ := f.rv.Load().(string); return s }
func (f *fakeStore) set(rv string)                        { f.rv.Store(rv) }

var (
	podsGR = schema.GroupResource{Resource: "pods"}
	rsGR   = schema.GroupResource{Group: "apps", Resource: "replicasets"}
)

func TestGuard(t *testing.T) {
	pods, rss := &fakeStore{}, &fakeStore{}
	pods.set("100")
	rss.set("100")
	g := workloop.NewGuard(map[schema.GroupResource]workloop.LastSyncRV{podsGR: pods, rsGR: rss})

	stale := func(want bool, wantRes schema.GroupResource) {
		t.Helper()
		res, got := g.Stale("ns/rs")
		if got != want || (want && res != wantRes) {
			t.Fatalf("Stale = %v %v, want %v %v", res, got, want, wantRes)
		}
	}
	stale(false, schema.GroupResource{})
	g.WroteAt("ns/rs", "uid-1", podsGR, "150")
	g.WroteAt("ns/rs", "uid-1", podsGR, "120") // an older write never lowers the mark
	stale(true, podsGR)
	pods.set("149")
	stale(true, podsGR)
	pods.set("150")
	stale(false, schema.GroupResource{})

	g.WroteAt("ns/rs", "uid-1", rsGR, "200")
	stale(true, rsGR)
	g.Clear("ns/rs", "uid-other") // another object's uid: kept
	stale(true, rsGR)
	g.Clear("ns/rs", "uid-1")
	stale(false, schema.GroupResource{})

	pods.set("100")
	g.WroteAt("ns/rs", "uid-1", rsGR, "300")
	g.WroteAt("ns/rs", "uid-2", podsGR, "101") // recreated: the old uid's writes go
	stale(true, podsGR)
	pods.set("101")
	stale(false, schema.GroupResource{})

	g.WroteAt("ns/rs", "", podsGR, "not-a-number")
	stale(false, schema.GroupResource{}) // unparseable versions never hold a key back

	var nilGuard *workloop.Guard
	nilGuard.WroteAt("k", "", podsGR, "1")
	if _, s := nilGuard.Stale("k"); s {
		t.Error("nil guard is stale")
	}
}

// A Loop with a Guard skips (and counts) syncs of a key whose write the
// cache has not caught up with, and syncs it once it has.
func TestLoopSkipsStaleKeys(t *testing.T) {
	pods := &fakeStore{}
	pods.set("10")
	g := workloop.NewGuard(map[schema.GroupResource]workloop.LastSyncRV{podsGR: pods})
	g.WroteAt("ns/rs", "uid", podsGR, "20")
	var calls atomic.Int32
	l := workloop.New("guarded-controller", func(context.Context, string) error { calls.Add(1); return nil }, workloop.Options{Guard: g})
	skipped := workloop.StaleCounter("guarded-controller", "pods")
	before := testutil.ToFloat64(skipped)
	l.Add("ns/rs")
	run(t, l)
	eventually(t, "a skipped sync", func() bool { return testutil.ToFloat64(skipped) > before })
	if calls.Load() != 0 {
		t.Fatal("synced a key whose write the cache had not seen")
	}
	pods.set("20")
	eventually(t, "the sync once the cache caught up", func() bool { return calls.Load() == 1 })
}
