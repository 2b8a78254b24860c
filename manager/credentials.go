package manager

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// Token lifetime and refresh, as KCM's dynamic client builder has them: an
// hour, refreshed when 80% of it has passed.
const (
	serviceAccountTokenSeconds = 3600
	serviceAccountTokenLeeway  = 20 // percent of the lifetime left when refreshed
	minTokenLifetime           = 10 * time.Minute
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
// ServiceAccount instead of the manager's credentials.
func (m *Manager) controllerConfig(name string) *rest.Config {
	cfg := withUserAgent(m.restConfig, name)
	if b, ok := m.opts.ClientBudgets[name]; ok {
		if b.QPS != 0 {
			cfg.QPS = b.QPS
		}
		if b.Burst != 0 {
			cfg.Burst = int(b.Burst)
		}
	}
	if !m.opts.UseServiceAccountCredentials {
		return cfg
	}
	anon := rest.AnonymousClientConfig(cfg)
	anon.WrapTransport = transport.TokenSourceWrapTransport(transport.NewCachedTokenSource(&serviceAccountTokens{
		client:    m.tokenClient,
		namespace: m.opts.ServiceAccountNamespace,
		name:      name,
	}))
	return anon
}

// serviceAccountTokens mints tokens for one ServiceAccount through the
// TokenRequest API, creating the ServiceAccount if it is missing.
type serviceAccountTokens struct {
	client          kubernetes.Interface
	namespace, name string
}

func (s *serviceAccountTokens) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var tr *authenticationv1.TokenRequest
	var lastErr error
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 4}, func(ctx context.Context) (bool, error) {
		if lastErr = s.ensureServiceAccount(ctx); lastErr != nil {
			return false, nil
		}
		seconds := int64(serviceAccountTokenSeconds)
		tr, lastErr = s.client.CoreV1().ServiceAccounts(s.namespace).CreateToken(ctx, s.name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
		}, metav1.CreateOptions{})
		return lastErr == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("token for service account %s/%s: %w (last error: %v)", s.namespace, s.name, err, lastErr)
	}
	lifetime := max(time.Until(tr.Status.ExpirationTimestamp.Time), minTokenLifetime)
	return &oauth2.Token{
		AccessToken: tr.Status.Token,
		TokenType:   "Bearer",
		Expiry:      time.Now().Add(lifetime - lifetime*serviceAccountTokenLeeway/100),
	}, nil
}

func (s *serviceAccountTokens) ensureServiceAccount(ctx context.Context) error {
	sas := s.client.CoreV1().ServiceAccounts(s.namespace)
	if _, err := sas.Get(ctx, s.name, metav1.GetOptions{}); err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	_, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
