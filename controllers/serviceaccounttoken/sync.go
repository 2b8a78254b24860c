package serviceaccounttoken

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/ctrlhost/ctrlhost/workloop"
)

// outcome turns a (retry, error) pair into the error the loop acts on: nil
// forgets the key, a retriable error requeues it with back-off (up to
// MaxRetries), any other error is logged and the key dropped.
func outcome(retriable bool, err error) error {
	switch {
	case err == nil:
		return nil
	case retriable:
		return err
	default:
		return workloop.Permanent(err)
	}
}

// syncServiceAccount deletes the token secrets of a ServiceAccount that is
// gone (or was replaced by one with another uid).
func (c *controller) syncServiceAccount(ctx context.Context, key string) error {
	ref, err := parseServiceAccountKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	sa, err := c.getServiceAccount(ctx, ref.namespace, ref.name, ref.uid, false)
	if err != nil {
		return fmt.Errorf("getting service account %s/%s: %w", ref.namespace, ref.name, err)
	}
	if sa != nil {
		return nil
	}
	logr.FromContextOrDiscard(ctx).
		V(4).
		Info("Service account deleted, removing tokens", "namespace", ref.namespace,
			"serviceaccount", ref.name)
	return outcome(c.deleteTokens(ctx, ref))
}

// syncSecret fills a token secret whose ServiceAccount exists, deletes one
// whose ServiceAccount does not, and, for a secret that is gone, removes it
// from its ServiceAccount's secrets.
func (c *controller) syncSecret(ctx context.Context, key string) error {
	ref, err := parseSecretKey(key)
	if err != nil {
		return workloop.Permanent(err)
	}
	log := logr.FromContextOrDiscard(ctx).
		WithValues("secret", ref.namespace+"/"+ref.name, "serviceAccount", ref.namespace+"/"+ref.saName)
	secret, err := c.getSecret(ref.namespace, ref.name, ref.uid)
	if err != nil {
		return fmt.Errorf("getting secret %s/%s: %w", ref.namespace, ref.name, err)
	}
	if secret == nil {
		sa, err := c.getServiceAccount(ctx, ref.namespace, ref.saName, ref.saUID, false)
		if err != nil || sa == nil {
			return nil
		}
		err = retry.RetryOnConflict(c.removeBackoff, func() error {
			return c.removeSecretReference(ctx, ref.namespace, ref.saName, ref.saUID, ref.name)
		})
		if err != nil {
			return workloop.Permanent(
				fmt.Errorf(
					"removing secret %s from service account %s/%s: %w",
					ref.name,
					ref.namespace,
					ref.saName,
					err,
				),
			)
		}
		return nil
	}
	sa, err := c.getServiceAccount(ctx, ref.namespace, ref.saName, ref.saUID, true)
	if err != nil {
		return fmt.Errorf("getting service account %s/%s: %w", ref.namespace, ref.saName, err)
	}
	if sa == nil {
		log.V(4).Info("Service account does not exist, deleting token")
		return outcome(c.deleteToken(ctx, ref.namespace, ref.name, ref.uid))
	}
	return outcome(c.fillToken(ctx, sa, secret))
}

// deleteTokens deletes the cached token secrets of the ServiceAccount ref.
func (c *controller) deleteTokens(ctx context.Context, ref saRef) (retriable bool, err error) {
	secrets, err := c.secrets.Secrets(ref.namespace).List(labels.Everything())
	if err != nil {
		return false, err // a cache error: not retried
	}
	var errs []error
	for _, s := range secrets {
		if !isTokenOf(s, ref.name, ref.uid) {
			continue
		}
		r, err := c.deleteToken(ctx, s.Namespace, s.Name, s.UID)
		retriable = retriable || r
		if err != nil {
			errs = append(errs, err)
		}
	}
	return retriable, errors.Join(errs...)
}

// isTokenOf reports whether s is a token secret of the ServiceAccount
// name/uid: its name annotation matches, and so does its uid annotation
// when it has one.
func isTokenOf(s *corev1.Secret, name string, uid types.UID) bool {
	if s.Type != corev1.SecretTypeServiceAccountToken ||
		s.Annotations[corev1.ServiceAccountNameKey] != name {
		return false
	}
	u := s.Annotations[corev1.ServiceAccountUIDKey]
	return u == "" || u == string(uid)
}

// deleteToken deletes a secret, preconditioned on its uid. Gone already or
// replaced (the precondition failed) is success.
func (c *controller) deleteToken(
	ctx context.Context,
	ns, name string,
	uid types.UID,
) (retriable bool, err error) {
	var opts metav1.DeleteOptions
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err = c.client.CoreV1().Secrets(ns).Delete(ctx, name, opts)
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	return true, fmt.Errorf("deleting token secret %s/%s: %w", ns, name, err)
}

// updates reports which of the secret's data must be written.
func (c *controller) updates(s *corev1.Secret) (ca, namespace, token bool) {
	ca = len(c.rootCA) > 0 && !bytes.Equal(s.Data[corev1.ServiceAccountRootCAKey], c.rootCA)
	namespace = len(s.Data[corev1.ServiceAccountNamespaceKey]) == 0
	token = len(s.Data[corev1.ServiceAccountTokenKey]) == 0
	return ca, namespace, token
}

// fillToken writes the token, ca.crt and namespace a cached secret lacks,
// and its ServiceAccount annotations, to a fresh copy of the secret. When
// the fresh copy is newer than the cache, it does nothing: the update event
// brings the secret back.
func (c *controller) fillToken(
	ctx context.Context,
	sa *corev1.ServiceAccount,
	cached *corev1.Secret,
) (retriable bool, err error) {
	if ca, ns, tok := c.updates(cached); !ca && !ns && !tok {
		return false, nil
	}
	secrets := c.client.CoreV1().Secrets(cached.Namespace)
	live, err := secrets.Get(ctx, cached.Name, metav1.GetOptions{})
	if err != nil {
		return !apierrors.IsNotFound(
				err,
			), fmt.Errorf(
				"getting secret %s/%s: %w",
				cached.Namespace,
				cached.Name,
				err,
			)
	}
	if live.ResourceVersion != cached.ResourceVersion {
		logr.FromContextOrDiscard(ctx).
			V(2).
			Info("Secret is not up to date, skipping token population",
				"secret", live.Namespace+"/"+live.Name)
		return false, nil
	}
	ca, ns, tok := c.updates(live)
	if !ca && !ns && !tok {
		return false, nil
	}
	if live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	if live.Data == nil {
		live.Data = map[string][]byte{}
	}
	if ca {
		live.Data[corev1.ServiceAccountRootCAKey] = bytes.Clone(c.rootCA)
	}
	if ns {
		live.Data[corev1.ServiceAccountNamespaceKey] = []byte(live.Namespace)
	}
	if tok {
		token, err := c.signer.token(sa, live)
		if err != nil {
			return false, err
		}
		live.Data[corev1.ServiceAccountTokenKey] = []byte(token)
	}
	live.Annotations[corev1.ServiceAccountNameKey] = sa.Name
	live.Annotations[corev1.ServiceAccountUIDKey] = string(sa.UID)
	_, err = secrets.Update(ctx, live, metav1.UpdateOptions{})
	switch {
	case err == nil, apierrors.IsConflict(err), apierrors.IsNotFound(err):
		// A conflict means someone else wrote it: its update event comes.
		return false, nil
	default:
		return true, fmt.Errorf("updating token secret %s/%s: %w", live.Namespace, live.Name, err)
	}
}

// removeSecretReference removes secretName from the secrets of a fresh copy
// of the ServiceAccount, when it is (still) the one with saUID.
func (c *controller) removeSecretReference(
	ctx context.Context,
	ns, saName string,
	saUID types.UID,
	secretName string,
) error {
	accounts := c.client.CoreV1().ServiceAccounts(ns)
	sa, err := accounts.Get(ctx, saName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if saUID != "" && saUID != sa.UID {
		return nil
	}
	kept := make([]corev1.ObjectReference, 0, len(sa.Secrets))
	for _, s := range sa.Secrets {
		if s.Name != secretName {
			kept = append(kept, s)
		}
	}
	if len(kept) == len(sa.Secrets) {
		return nil
	}
	sa.Secrets = kept
	_, err = accounts.Update(ctx, sa, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// getServiceAccount returns the ServiceAccount ns/name when its uid is uid
// (any uid when uid is empty), from the cache, or, when the cache has no
// such ServiceAccount and live is set, from the API server. Nil, nil means
// there is none.
func (c *controller) getServiceAccount(
	ctx context.Context,
	ns, name string,
	uid types.UID,
	live bool,
) (*corev1.ServiceAccount, error) {
	sa, err := c.serviceAccounts.ServiceAccounts(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err == nil && (uid == "" || uid == sa.UID) {
		return sa, nil
	}
	if !live {
		return nil, nil
	}
	sa, err = c.client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if uid == "" || uid == sa.UID {
		return sa, nil
	}
	return nil, nil
}

// getSecret returns the cached secret ns/name when its uid is uid (any
// when uid is empty); nil, nil means there is none.
func (c *controller) getSecret(ns, name string, uid types.UID) (*corev1.Secret, error) {
	s, err := c.secrets.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if uid == "" || uid == s.UID {
		return s, nil
	}
	return nil, nil
}
