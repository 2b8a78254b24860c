// Package bootstraptoken reads bootstrap token Secrets (type
// bootstrap.kubernetes.io/token) as KCM's bootstrap controllers read them:
// when a token expires, and whether it may sign the cluster-info
// ConfigMap. The token cleaner and the bootstrap signer share it, so that
// both judge a token's expiry alike.
//
// Guarantees: nothing here modifies the Secret it is given; an expiration
// that does not parse as RFC 3339 is an error, which both controllers
// treat as expired, as KCM (and the token authenticator) do.
package bootstraptoken

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstrapsecrets "k8s.io/cluster-bootstrap/util/secrets"
)

// The data keys and values of a bootstrap token Secret this package reads.
const (
	ExpirationKey = bootstrapapi.BootstrapTokenExpirationKey
	IDKey         = bootstrapapi.BootstrapTokenIDKey
	SecretKey     = bootstrapapi.BootstrapTokenSecretKey
	UsageSigning  = bootstrapapi.BootstrapTokenUsageSigningKey
	NamePrefix    = bootstrapapi.BootstrapTokenSecretPrefix
	SecretType    = bootstrapapi.SecretTypeBootstrapToken
)

// Expiry reports how long until s expires (<= 0: expired). A token
// without an expiration never expires (expires false). An unparsable
// expiration is an error, with expires true.
func Expiry(s *corev1.Secret, now time.Time) (left time.Duration, expires bool, err error) {
	v, found := s.Data[ExpirationKey]
	if !found || len(v) == 0 {
		return 0, false, nil
	}
	at, err := time.Parse(time.RFC3339, string(v))
	if err != nil {
		return 0, true, fmt.Errorf("data key %q: %q is not an RFC 3339 time: %w",
			ExpirationKey, v, err)
	}
	return at.Sub(now), true, nil
}

// Signer is a token that may sign: its ID and secret, and, when it
// expires, how long it has left (Expires false: it never does).
type Signer struct {
	ID, Secret string
	Expires    bool
	Left       time.Duration
}

// ErrNotSigning is the reason ForSigning gives for a valid token whose
// usage-bootstrap-signing is not "true".
var ErrNotSigning = errors.New("not a signing token: data key " + UsageSigning +
	" is not \"true\"")

// ForSigning returns the token s holds if it may sign at now, as KCM's
// bootstrap signer decides it: the name is bootstrap-token-<id> with a
// six-character [a-z0-9] id, data key token-id holds that id, token-secret
// is not empty, the token has not expired (an unparsable expiration counts
// as expired), and usage-bootstrap-signing is "true". Otherwise the error
// says which check failed. The Secret's type and namespace are the
// caller's to check.
func ForSigning(s *corev1.Secret, now time.Time) (Signer, error) {
	nameID, ok := bootstrapsecrets.ParseName(s.Name)
	if !ok {
		return Signer{}, fmt.Errorf("name %q is not %s<six characters of [a-z0-9]>",
			s.Name, NamePrefix)
	}
	id := string(s.Data[IDKey])
	switch {
	case id == "":
		return Signer{}, fmt.Errorf("data key %q is missing or empty", IDKey)
	case id != nameID:
		return Signer{}, fmt.Errorf("data key %q is %q, but the name says %q", IDKey, id, nameID)
	}
	secret := string(s.Data[SecretKey])
	if secret == "" {
		return Signer{}, fmt.Errorf("data key %q is missing or empty", SecretKey)
	}
	left, expires, err := Expiry(s, now)
	switch {
	case err != nil:
		return Signer{}, fmt.Errorf("treated as expired: %w", err)
	case expires && left <= 0:
		return Signer{}, fmt.Errorf("expired at %s", s.Data[ExpirationKey])
	}
	if string(s.Data[UsageSigning]) != "true" {
		return Signer{}, ErrNotSigning
	}
	return Signer{ID: id, Secret: secret, Expires: expires, Left: left}, nil
}
