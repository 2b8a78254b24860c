package term

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/fence"
	"github.com/ctrlhost/ctrlhost/internal/satoken"
	"github.com/ctrlhost/ctrlhost/internal/shardgroup"
)

// Clients are the host's own clients and what its controllers' clients
// are made of.
type Clients struct {
	RESTConfig *rest.Config // nil when the host was given clients instead
	Client     kubernetes.Interface
	Metadata   metadata.Interface
	Dynamic    dynamic.Interface // nil: no dynamic informers
	// Credentials mint the controllers' ServiceAccount tokens
	// (--use-service-account-credentials); nil without a REST config.
	Credentials *satoken.Credentials
	// Budgets are the controllers' own rate limits; ServiceAccounts is
	// --use-service-account-credentials.
	Budgets         map[string]Budget
	ServiceAccounts bool
}

// Budget is a controller's client-side rate limit: 0 leaves the host's
// (--kube-api-qps, --kube-api-burst).
type Budget struct {
	QPS   float32
	Burst int32
}

// Defaults fill what a REST config leaves zero: the host's flags.
type Defaults struct {
	QPS         float32 // --kube-api-qps
	Burst       int32   // --kube-api-burst
	ContentType string  // --kube-api-content-type
	UserAgent   string  // the component
	// TokenNamespace is where the controllers' ServiceAccounts live
	// (--use-service-account-credentials).
	TokenNamespace string
}

// FromConfig makes c's clients from cfg, copied, its zero client settings
// filled from d: the shared informers' typed, metadata and dynamic
// clients, on one connection pool, and the minting of the controllers'
// ServiceAccount tokens.
func (c *Clients) FromConfig(cfg *rest.Config, d Defaults) error {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS = d.QPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = int(d.Burst)
	}
	if cfg.ContentType == "" {
		cfg.ContentType = d.ContentType
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = d.UserAgent
	}
	c.RESTConfig = cfg
	root, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("REST config: %w", err)
	}
	informersConfig := WithUserAgent(cfg, "shared-informers")
	if c.Client, err = kubernetes.NewForConfigAndClient(informersConfig, root); err != nil {
		return fmt.Errorf("REST config: %w", err)
	}
	if c.Metadata, err = metadata.NewForConfigAndClient(informersConfig, root); err != nil {
		return fmt.Errorf("REST config: %w", err)
	}
	if c.Dynamic, err = dynamic.NewForConfigAndClient(informersConfig, root); err != nil {
		return fmt.Errorf("REST config: %w", err)
	}
	tokenConfig := WithUserAgent(cfg, "tokens")
	tokens, err := kubernetes.NewForConfigAndClient(tokenConfig, root)
	if err != nil {
		return fmt.Errorf("REST config: %w", err)
	}
	c.Credentials = &satoken.Credentials{Namespace: d.TokenNamespace, Client: tokens,
		Config: tokenConfig}
	return nil
}

// clientBuilder implements descriptor.ClientBuilder for one term:
// per-controller user agents over the manager's REST config, fenced by the
// term's gate, or the injected clients as they are (not fenced).
type clientBuilder struct {
	host     *Clients
	gate     *fence.Gate          // nil: not fenced
	root     bool                 // the host's credentials, never a ServiceAccount's
	limiters *shardgroup.Limiters // nil: each client limits its own requests
	// ctx bounds what the clients do on the host's behalf: minting the
	// controller's ServiceAccount tokens stops when it ends.
	ctx context.Context
}

func (c clientBuilder) Config(name string) (*rest.Config, error) {
	if c.host.RESTConfig == nil {
		return nil, fmt.Errorf("controller %q: no REST config: the manager was built WithClient", name)
	}
	cfg := c.host.controllerConfig(c.ctx, name, c.root, c.gate)
	c.limiters.Apply(name, c.root, cfg)
	if c.gate != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return fence.RoundTripper(c.gate, name, rt)
		})
	}
	return cfg, nil
}

func (c clientBuilder) Client(name string) (kubernetes.Interface, error) {
	if c.host.RESTConfig == nil {
		return c.host.Client, nil
	}
	cfg, _ := c.Config(name)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller %q: client: %w", name, err)
	}
	return cs, nil
}

func (c clientBuilder) DynamicClient(name string) (dynamic.Interface, error) {
	if c.host.RESTConfig == nil {
		if c.host.Dynamic == nil {
			return nil, fmt.Errorf("controller %q: no dynamic client: the manager was built WithClient "+
				"without WithDynamicClient", name)
		}
		return c.host.Dynamic, nil
	}
	cfg, _ := c.Config(name)
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller %q: dynamic client: %w", name, err)
	}
	return dc, nil
}

func (c clientBuilder) MetadataClient(name string) (metadata.Interface, error) {
	if c.host.RESTConfig == nil {
		return c.host.Metadata, nil
	}
	cfg, _ := c.Config(name)
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller %q: metadata client: %w", name, err)
	}
	return mc, nil
}

// controllerConfig is the REST config of one controller: the manager's,
// with a user agent naming the controller, its own rate-limit budget, and
// with --use-service-account-credentials a bearer token of its own
// ServiceAccount instead of the manager's credentials (unless root).
//
// The token is minted on the first request that needs it, on ctx (the
// term's controllers' context: minting stops when they are told to stop),
// through a client fenced by gate under the controller's name: the
// ServiceAccount and TokenRequest it may create are writes of the term.
func (h *Clients) controllerConfig(ctx context.Context, name string, root bool,
	gate *fence.Gate) *rest.Config {
	cfg := WithUserAgent(h.RESTConfig, name)
	if b, ok := h.Budgets[name]; ok {
		if b.QPS != 0 {
			cfg.QPS = b.QPS
		}
		if b.Burst != 0 {
			cfg.Burst = int(b.Burst)
		}
	}
	if root || !h.ServiceAccounts || h.Credentials == nil {
		return cfg
	}
	return h.Credentials.For(ctx, cfg, name, gate)
}

// WithUserAgent returns a copy of cfg whose user agent ends in "/name".
func WithUserAgent(cfg *rest.Config, name string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.UserAgent = cfg.UserAgent + "/" + name
	return c
}
