package manager

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/fence"
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
func (h *hostClients) controllerConfig(ctx context.Context, name string, root bool,
	gate *fence.Gate) *rest.Config {
	cfg := withUserAgent(h.restConfig, name)
	if b, ok := h.budgets[name]; ok {
		if b.QPS != 0 {
			cfg.QPS = b.QPS
		}
		if b.Burst != 0 {
			cfg.Burst = int(b.Burst)
		}
	}
	if root || !h.serviceAccounts || h.credentials == nil {
		return cfg
	}
	return h.credentials.For(ctx, cfg, name, gate)
}
