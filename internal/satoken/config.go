package satoken

import (
	"context"
	"net/http"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/ctrlhost/ctrlhost/fence"
)

// Credentials make REST configs that act as a controller's own
// ServiceAccount in Namespace, with tokens minted through the TokenRequest
// API (KCM's --use-service-account-credentials).
type Credentials struct {
	// Namespace holds the controllers' ServiceAccounts (kube-system in KCM).
	Namespace string
	// Client mints the tokens of controllers that are not fenced.
	Client kubernetes.Interface
	// Config is Client's REST config; For fences a copy of it per
	// controller. Nil: every controller mints through Client.
	Config *rest.Config
}

// For returns a copy of cfg that authenticates as the ServiceAccount name
// with a bearer token of its own instead of cfg's credentials. The token
// is minted on the first request that needs it, on ctx (minting stops when
// ctx ends; nil: never), and refreshed before it lapses. With a gate, the
// minting client is fenced by it under name: the ServiceAccount and the
// TokenRequest it may create are writes of the gate's holder, refused once
// the gate is shut.
func (c *Credentials) For(ctx context.Context, cfg *rest.Config, name string,
	gate *fence.Gate) *rest.Config {
	if ctx == nil {
		ctx = context.Background()
	}
	tokens := c.Client
	if gate != nil && c.Config != nil {
		tc := rest.CopyConfig(c.Config)
		tc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return fence.RoundTripper(gate, name, rt)
		})
		if cs, err := kubernetes.NewForConfig(tc); err == nil {
			tokens = cs
		}
	}
	anon := rest.AnonymousClientConfig(cfg)
	// AnonymousClientConfig drops a custom Transport along with the
	// credentials; it is how the config reaches the API server (a caller
	// may have set one that carries no credentials), so it is kept.
	anon.Transport = cfg.Transport
	anon.WrapTransport = transport.TokenSourceWrapTransport(transport.NewCachedTokenSource(
		Source(ctx, tokens, c.Namespace, name)))
	return anon
}
