package manager

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

// hostClients are the Manager's own clients and what its controllers'
// clients are made of.
type hostClients struct {
	restConfig *rest.Config // nil when built WithClient
	client     kubernetes.Interface
	metaClient metadata.Interface
	dynClient  dynamic.Interface // nil: no dynamic informers (built WithClient alone)
	// credentials mint the controllers' ServiceAccount tokens
	// (--use-service-account-credentials); nil when built WithClient.
	credentials *satoken.Credentials
	// budgets are Options.ClientBudgets; serviceAccounts is
	// --use-service-account-credentials.
	budgets         map[string]ClientBudget
	serviceAccounts bool
}

// clientBuilder implements descriptor.ClientBuilder for one term:
// per-controller user agents over the manager's REST config, fenced by the
// term's gate, or the injected clients as they are (not fenced).
type clientBuilder struct {
	host     *hostClients
	gate     *fence.Gate          // nil: not fenced
	root     bool                 // the host's credentials, never a ServiceAccount's
	limiters *shardgroup.Limiters // nil: each client limits its own requests
	// ctx bounds what the clients do on the host's behalf: minting the
	// controller's ServiceAccount tokens stops when it ends.
	ctx context.Context
}

func (c clientBuilder) Config(name string) (*rest.Config, error) {
	if c.host.restConfig == nil {
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
	if c.host.restConfig == nil {
		return c.host.client, nil
	}
	cfg, _ := c.Config(name)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller %q: client: %w", name, err)
	}
	return cs, nil
}

func (c clientBuilder) DynamicClient(name string) (dynamic.Interface, error) {
	if c.host.restConfig == nil {
		if c.host.dynClient == nil {
			return nil, fmt.Errorf("controller %q: no dynamic client: the manager was built WithClient "+
				"without WithDynamicClient", name)
		}
		return c.host.dynClient, nil
	}
	cfg, _ := c.Config(name)
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller %q: dynamic client: %w", name, err)
	}
	return dc, nil
}

func (c clientBuilder) MetadataClient(name string) (metadata.Interface, error) {
	if c.host.restConfig == nil {
		return c.host.metaClient, nil
	}
	cfg, _ := c.Config(name)
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller %q: metadata client: %w", name, err)
	}
	return mc, nil
}
