package manager

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/ctrlhost/ctrlhost/fence"
)

// clientBuilder implements descriptor.ClientBuilder for one term:
// per-controller user agents over the manager's REST config, fenced by the
// term's gate, or the injected clients as they are (not fenced).
type clientBuilder struct {
	m        *Manager
	gate     *fence.Gate // nil: not fenced
	root     bool        // the host's credentials, never a ServiceAccount's
	limiters *limiterSet // nil: each client limits its own requests
	// ctx bounds what the clients do on the host's behalf: minting the
	// controller's ServiceAccount tokens stops when it ends.
	ctx context.Context
}

// limiterSet hands the clients one controller gets in every slot term of
// a shard group the same rate limiter, so that its budget on a replica
// (--kube-api-qps, --kube-api-burst, ClientBudgets) is the same however
// many slots the replica works: replicas add budget, slots do not.
type limiterSet struct {
	mu     sync.Mutex
	byName map[limiterKey]flowcontrol.RateLimiter
}

type limiterKey struct {
	name string
	root bool
}

func newLimiterSet() *limiterSet {
	return &limiterSet{byName: map[limiterKey]flowcontrol.RateLimiter{}}
}

// apply sets cfg's rate limiter to name's (root: its root client's), made
// from cfg's QPS and burst the first time.
func (l *limiterSet) apply(name string, root bool, cfg *rest.Config) {
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

func (c clientBuilder) Config(name string) (*rest.Config, error) {
	if c.m.restConfig == nil {
		return nil, fmt.Errorf("controller %q: no REST config: the manager was built WithClient", name)
	}
	cfg := c.m.controllerConfig(c.ctx, name, c.root, c.gate)
	c.limiters.apply(name, c.root, cfg)
	if c.gate != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return fence.RoundTripper(c.gate, name, rt)
		})
	}
	return cfg, nil
}

func (c clientBuilder) Client(name string) (kubernetes.Interface, error) {
	if c.m.restConfig == nil {
		return c.m.client, nil
	}
	cfg, _ := c.Config(name)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller %q: client: %w", name, err)
	}
	return cs, nil
}

func (c clientBuilder) DynamicClient(name string) (dynamic.Interface, error) {
	if c.m.restConfig == nil {
		if c.m.dynClient == nil {
			return nil, fmt.Errorf("controller %q: no dynamic client: the manager was built WithClient "+
				"without WithDynamicClient", name)
		}
		return c.m.dynClient, nil
	}
	cfg, _ := c.Config(name)
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller %q: dynamic client: %w", name, err)
	}
	return dc, nil
}

func (c clientBuilder) MetadataClient(name string) (metadata.Interface, error) {
	if c.m.restConfig == nil {
		return c.m.metaClient, nil
	}
	cfg, _ := c.Config(name)
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller %q: metadata client: %w", name, err)
	}
	return mc, nil
}
