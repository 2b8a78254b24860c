package manager

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

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
func (m *Manager) controllerConfig(name string, root bool) *rest.Config {
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
	anon := rest.AnonymousClientConfig(cfg)
	anon.WrapTransport = transport.TokenSourceWrapTransport(transport.NewCachedTokenSource(
		satoken.Source(m.tokenClient, m.opts.ServiceAccountNamespace, name)))
	return anon
}
