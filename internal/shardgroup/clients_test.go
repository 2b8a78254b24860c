package shardgroup

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"
)

// TestLimitersShareOneLimiterPerController: one controller's clients share
// a limiter, its root client has another, other controllers theirs; a nil
// set, a negative QPS (no limit) and a caller's own limiter are left alone.
func TestLimitersShareOneLimiterPerController(t *testing.T) {
	l := NewLimiters()
	cfg := func() *rest.Config { return &rest.Config{QPS: 7, Burst: 9} }
	a1, a2, root, b := cfg(), cfg(), cfg(), cfg()
	l.Apply("a", false, a1)
	l.Apply("a", false, a2)
	l.Apply("a", true, root)
	l.Apply("b", false, b)
	switch {
	case a1.RateLimiter == nil:
		t.Fatal("no limiter set")
	case a1.RateLimiter != a2.RateLimiter:
		t.Error("two clients of one controller got limiters of their own")
	case root.RateLimiter == a1.RateLimiter || b.RateLimiter == a1.RateLimiter:
		t.Error("a root client or another controller shares the controller's limiter")
	}
	if qps := a1.RateLimiter.QPS(); qps != 7 {
		t.Errorf("limiter QPS %v, want the config's 7", qps)
	}

	var none *Limiters
	plain := cfg()
	none.Apply("a", false, plain)
	unlimited := &rest.Config{QPS: -1}
	l.Apply("c", false, unlimited)
	own := flowcontrol.NewFakeAlwaysRateLimiter()
	mine := &rest.Config{QPS: 7, RateLimiter: own}
	l.Apply("a", false, mine)
	switch {
	case plain.RateLimiter != nil:
		t.Error("a nil set gave a limiter")
	case unlimited.RateLimiter != nil:
		t.Error("a negative QPS (client-go's no limit) got a limiter")
	case mine.RateLimiter != own:
		t.Error("the caller's own limiter was replaced")
	}
}

func TestLeaseClientConfigBudgetsTheLeases(t *testing.T) {
	for _, tc := range []struct {
		name      string
		qps       float32
		burst     int
		slots     int
		retry     time.Duration
		wantQPS   float32
		wantBurst int
	}{
		// 17 Leases, 4 requests each per 2s.
		{name: "defaults raised", qps: 20, burst: 30, slots: 16, retry: 2 * time.Second,
			wantQPS: 34, wantBurst: 68},
		{name: "higher budget kept", qps: 500, burst: 1000, slots: 16, retry: 2 * time.Second,
			wantQPS: 500, wantBurst: 1000},
		{name: "no retry period", qps: 20, burst: 30, slots: 3, wantQPS: 20, wantBurst: 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := &rest.Config{QPS: tc.qps, Burst: tc.burst, UserAgent: "kcm/shard"}
			c := LeaseClientConfig(base, tc.slots, tc.retry)
			if c.QPS != tc.wantQPS || c.Burst != tc.wantBurst {
				t.Errorf("QPS %v burst %d, want %v and %d", c.QPS, c.Burst, tc.wantQPS, tc.wantBurst)
			}
			if base.QPS != tc.qps || c.UserAgent != base.UserAgent {
				t.Error("the base config was changed, or the copy lost its user agent")
			}
		})
	}
}

// TestDiscoveryScopeAsksOnce: an answer is remembered; a resource
// discovery does not list is an error naming it.
func TestDiscoveryScopeAsksOnce(t *testing.T) {
	fake := &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "example.com/v1",
		APIResources: []metav1.APIResource{
			{Name: "widgets", Namespaced: true},
			{Name: "clusterwidgets", Namespaced: false},
		},
	}}}
	scope := DiscoveryScope(&fakediscovery.FakeDiscovery{Fake: fake})
	ctx := context.Background()
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	for range 3 {
		if ns, err := scope(ctx, gv.WithResource("widgets")); err != nil || !ns {
			t.Fatalf("widgets: namespaced %v, %v; want true", ns, err)
		}
	}
	if asked := len(fake.Actions()); asked != 1 {
		t.Errorf("discovery asked %d times for one resource, want once", asked)
	}
	if ns, err := scope(ctx, gv.WithResource("clusterwidgets")); err != nil || ns {
		t.Errorf("clusterwidgets: namespaced %v, %v; want false", ns, err)
	}
	_, err := scope(ctx, gv.WithResource("gadgets"))
	if err == nil || !strings.Contains(err.Error(), "gadgets") {
		t.Errorf("an unlisted resource: %v, want an error naming it", err)
	}
}
