package shardgroup

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/ctrlhost/ctrlhost/internal/served"
)

// Limiters hands the clients one controller gets in every slot term of a
// group the same rate limiter, so that its budget on a replica
// (--kube-api-qps, --kube-api-burst, a client budget of its own) is the
// same however many slots the replica works: replicas add budget, slots do
// not. A nil *Limiters leaves each client to limit its own requests, as
// outside shard groups. It is safe for concurrent use.
type Limiters struct {
	mu     sync.Mutex
	byName map[limiterKey]flowcontrol.RateLimiter
}

type limiterKey struct {
	name string
	root bool
}

// NewLimiters returns a set of rate limiters for one group's slot terms.
func NewLimiters() *Limiters {
	return &Limiters{byName: map[limiterKey]flowcontrol.RateLimiter{}}
}

// Apply sets cfg's rate limiter to the one of controller name (root: its
// root client's, apart from its others), made from cfg's QPS and burst the
// first time it is asked for.
func (l *Limiters) Apply(name string, root bool, cfg *rest.Config) {
	if l == nil || cfg.QPS < 0 || cfg.RateLimiter != nil {
		// A negative QPS is client-go's "no rate limit" (a limiter made
		// of it would refuse every request), and a limiter the caller
		// set is theirs.
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := limiterKey{name, root}
	rl, ok := l.byName[k]
	if !ok {
		rl = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
		l.byName[k] = rl
	}
	cfg.RateLimiter = rl
}

// LeaseClientConfig returns a copy of cfg for the client of a group's
// Leases (slots slot Leases and the member Lease, renewed every
// retryPeriod): a client of its own, as KCM gives leader election, with a
// budget that covers a Get and an Update per Lease per retry period, twice
// over for campaigns and releases. So the Leases neither wait behind nor
// starve the host's other requests: at --kube-api-qps 20, sixteen slot
// Leases renewed every 2s would take most of the budget, and releasing a
// leaving member's slots would queue behind each other. cfg's own QPS and
// burst are kept where they are higher.
func LeaseClientConfig(cfg *rest.Config, slots int, retryPeriod time.Duration) *rest.Config {
	c := rest.CopyConfig(cfg)
	leases := float64(slots + 1)
	if retryPeriod > 0 {
		c.QPS = max(c.QPS, float32(4*leases/retryPeriod.Seconds()))
	}
	c.Burst = max(c.Burst, int(4*leases))
	return c
}

// DiscoveryScope returns a ScopeFunc that asks disc, and remembers each
// answer for the life of the function. No lock is held while discovery
// answers: an informer's list that asks during a partition waits only for
// its own request, bounded by its own context (a REST mapper's lock would
// hold every other informer too).
func DiscoveryScope(disc discovery.DiscoveryInterface) ScopeFunc {
	var known sync.Map // schema.GroupVersionResource → namespaced
	return func(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
		if v, ok := known.Load(gvr); ok {
			return v.(bool), nil
		}
		list, err := served.ResourcesOf(ctx, disc, gvr.GroupVersion())
		if err != nil {
			return false, err
		}
		for _, r := range list.APIResources {
			if r.Name == gvr.Resource {
				known.Store(gvr, r.Namespaced)
				return r.Namespaced, nil
			}
		}
		return false, fmt.Errorf("discovery does not list %v", gvr)
	}
}
