// Package satoken mints bearer tokens for one ServiceAccount through the
// TokenRequest API, for clients that act as a controller's own
// ServiceAccount (KCM's --use-service-account-credentials), and the REST
// configs of such clients (Credentials.For), fenced by a term's gate.
//
// Guarantees: a token is requested with KCM's lifetime (an hour) and handed
// out with an expiry at 80% of it, so a caching wrapper (client-go's
// transport.NewCachedTokenSource) refreshes it well before it lapses; a
// missing ServiceAccount is created first; transient failures are retried
// with back-off for up to 30 seconds per Token call, and never past the
// context the source was made with.
//
// Non-guarantees: tokens are not revoked when the caller stops using them;
// the ServiceAccount is never deleted.
package satoken

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
)

// Token lifetime and refresh, as KCM's dynamic client builder has them: an
// hour, refreshed when 80% of it has passed.
const (
	lifetimeSeconds = 3600
	leewayPercent   = 20 // of the lifetime, left when refreshed
	minLifetime     = 10 * time.Minute
)

// Source returns a token source for the ServiceAccount namespace/name that
// requests tokens with client, on ctx: once ctx is done, Token fails at
// once. Wrap it in transport.NewCachedTokenSource.
func Source(
	ctx context.Context,
	client kubernetes.Interface,
	namespace, name string,
) oauth2.TokenSource {
	return &source{ctx: ctx, client: client, namespace: namespace, name: name}
}

type source struct {
	ctx             context.Context
	client          kubernetes.Interface
	namespace, name string
}

func (s *source) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	var tr *authenticationv1.TokenRequest
	var lastErr error
	err := wait.ExponentialBackoffWithContext(
		ctx,
		wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 4},
		func(ctx context.Context) (bool, error) {
			if lastErr = s.ensureServiceAccount(ctx); lastErr != nil {
				return false, nil
			}
			seconds := int64(lifetimeSeconds)
			tr, lastErr = s.client.CoreV1().
				ServiceAccounts(s.namespace).
				CreateToken(ctx, s.name, &authenticationv1.TokenRequest{
					Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
				}, metav1.CreateOptions{})
			return lastErr == nil, nil
		},
	)
	if err != nil {
		return nil, fmt.Errorf(
			"token for service account %s/%s: %w (last error: %v)",
			s.namespace,
			s.name,
			err,
			lastErr,
		)
	}
	lifetime := max(time.Until(tr.Status.ExpirationTimestamp.Time), minLifetime)
	return &oauth2.Token{
		AccessToken: tr.Status.Token,
		TokenType:   "Bearer",
		Expiry:      time.Now().Add(lifetime - lifetime*leewayPercent/100),
	}, nil
}

func (s *source) ensureServiceAccount(ctx context.Context) error {
	sas := s.client.CoreV1().ServiceAccounts(s.namespace)
	if _, err := sas.Get(ctx, s.name, metav1.GetOptions{}); err == nil ||
		!apierrors.IsNotFound(err) {
		return err
	}
	_, err := sas.Create(
		ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace}},
		metav1.CreateOptions{},
	)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
