package manager

import (
	"context"
	"net/http"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/ctrlhost/ctrlhost/fence"
	"github.com/ctrlhost/ctrlhost/internal/satoken"
)

// ClientBudget is a per-controller client-side rate limit.
type ClientBudget struct {
	// QPS, 0 for the manager's --kube-api-qps.
	QPS float32
	// Burst, 0 for the manager's --kube-api-burst.
	Burst int32
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
func (m *Manager) controllerConfig(ctx context.Context, name string, root bool,
	gate *fence.Gate) *rest.Config {
	cfg := withUserAgent(m.restConfig, name)
	if b, ok := m.opts.ClientBudgets[name]; ok {
		if b.QPS != 0 {
			cfg.QPS = b.QPS
		}
		if b.Burst != 0 {
			cfg.Burst = int(b.Burst)
		}
	}
	if root || !m.opts.UseServiceAccountCredentials {
		return cfg
	}
	if ctx == nil {
		ctx = context.Background()
	}
	tokens := m.tokenClient
	if gate != nil && m.tokenConfig != nil {
		tc := rest.CopyConfig(m.tokenConfig)
		tc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return fence.RoundTripper(gate, name, rt)
		})
		if cs, err := kubernetes.NewForConfig(tc); err == nil {
			tokens = cs
		}
	}
	anon := rest.AnonymousClientConfig(cfg)
	// AnonymousClientConfig drops a custom Transport with the credentials;
	// it is how this config reaches the API server (the rest of the host's
	// clients use it), so the controller's keeps it.
	anon.Transport = cfg.Transport
	anon.WrapTransport = transport.TokenSourceWrapTransport(transport.NewCachedTokenSource(
		satoken.Source(ctx, tokens, m.opts.ServiceAccountNamespace, name)))
	return anon
}
