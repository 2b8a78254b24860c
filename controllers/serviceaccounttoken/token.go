package serviceaccounttoken

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
)

// legacyIssuer is the issuer of secret-based service-account tokens; the
// API server accepts it beside its --service-account-issuer.
const legacyIssuer = "kubernetes/serviceaccount"

// The private claims of a legacy token, as the API server's legacy
// validator reads them.
const (
	claimNamespace          = "kubernetes.io/serviceaccount/namespace"
	claimSecretName         = "kubernetes.io/serviceaccount/secret.name"
	ClaimServiceAccountName = "kubernetes.io/serviceaccount/service-account.name"
	ClaimServiceAccountUID  = "kubernetes.io/serviceaccount/service-account.uid"
)

// signer signs legacy tokens with one private key.
type signer struct {
	sig   jose.Signer
	alg   jose.SignatureAlgorithm
	keyID string
}

// newSigner returns a signer for an RSA key (RS256) or an ECDSA key on
// P-256, P-384 or P-521 (ES256, ES384, ES512), whose tokens carry the key
// id the API server derives from the public key.
func newSigner(key any) (*signer, error) {
	var alg jose.SignatureAlgorithm
	var pub any
	switch k := key.(type) {
	case *rsa.PrivateKey:
		alg, pub = jose.RS256, &k.PublicKey
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			alg = jose.ES256
		case elliptic.P384():
			alg = jose.ES384
		case elliptic.P521():
			alg = jose.ES512
		default:
			return nil, fmt.Errorf("ECDSA key on curve %s: only P-256, P-384 and P-521 can sign tokens",
				k.Curve.Params().Name)
		}
		pub = &k.PublicKey
	default:
		return nil, fmt.Errorf("a %T cannot sign tokens; use an RSA or ECDSA private key", key)
	}
	kid, err := keyID(pub)
	if err != nil {
		return nil, err
	}
	sig, err := jose.NewSigner(jose.SigningKey{
		Algorithm: alg,
		Key:       &jose.JSONWebKey{Key: key, KeyID: kid, Algorithm: string(alg), Use: "sig"},
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("token signer: %w", err)
	}
	return &signer{sig: sig, alg: alg, keyID: kid}, nil
}

// keyID is the API server's key id of a public key: the unpadded base64url
// SHA-256 digest of its PKIX DER encoding.
func keyID(pub any) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encoding the public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// legacyClaims are the claims of the token of secret for sa.
func legacyClaims(sa *corev1.ServiceAccount, secret *corev1.Secret) map[string]any {
	return map[string]any{
		"iss":                   legacyIssuer,
		"sub":                   "system:serviceaccount:" + sa.Namespace + ":" + sa.Name,
		claimNamespace:          sa.Namespace,
		claimSecretName:         secret.Name,
		ClaimServiceAccountName: sa.Name,
		ClaimServiceAccountUID:  string(sa.UID),
	}
}

// token signs the legacy token of secret for sa.
func (s *signer) token(sa *corev1.ServiceAccount, secret *corev1.Secret) (string, error) {
	tok, err := jwt.Signed(s.sig).Claims(legacyClaims(sa, secret)).Serialize()
	if err != nil {
		return "", fmt.Errorf(
			"signing the token of secret %s/%s: %w",
			secret.Namespace,
			secret.Name,
			err,
		)
	}
	return tok, nil
}
