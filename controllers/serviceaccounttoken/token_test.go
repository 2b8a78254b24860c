package serviceaccounttoken

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var allAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512}

// legacyPrivate are the private claims the API server's legacy validator
// reads.
type legacyPrivate struct {
	Namespace          string `json:"kubernetes.io/serviceaccount/namespace"`
	SecretName         string `json:"kubernetes.io/serviceaccount/secret.name"`
	ServiceAccountName string `json:"kubernetes.io/serviceaccount/service-account.name"`
	ServiceAccountUID  string `json:"kubernetes.io/serviceaccount/service-account.uid"`
}

// TestTokenIsSignedWithKeyAndCarriesLegacyClaims: for each key kind KCM
// signs with, the token verifies against the public key, its header names
// the algorithm of the key and the key id the API server derives (the
// unpadded base64url SHA-256 of the PKIX public key), and its claims are
// the legacy ones, nothing more.
func TestTokenIsSignedWithKeyAndCarriesLegacyClaims(t *testing.T) {
	sa := &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder", UID: "sa-uid"},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder-token"}}
	for _, tt := range []struct {
		kind string
		alg  jose.SignatureAlgorithm
	}{{"rsa", jose.RS256}, {"p256", jose.ES256}, {"p384", jose.ES384}, {"p521", jose.ES512}} {
		t.Run(tt.kind, func(t *testing.T) {
			key := NewTestKey(t, tt.kind)
			s, err := newSigner(key)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := s.token(sa, secret)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := jwt.ParseSigned(tok, allAlgs)
			if err != nil {
				t.Fatal(err)
			}
			if len(parsed.Headers) != 1 {
				t.Fatalf("%d headers, want 1", len(parsed.Headers))
			}
			h := parsed.Headers[0]
			der, err := x509.MarshalPKIXPublicKey(key.Public())
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(der)
			if want := base64.RawURLEncoding.EncodeToString(sum[:]); h.KeyID != want {
				t.Errorf("kid %q, want %q", h.KeyID, want)
			}
			if h.Algorithm != string(tt.alg) {
				t.Errorf("alg %q, want %q", h.Algorithm, tt.alg)
			}
			var public jwt.Claims
			var private legacyPrivate
			var all map[string]any
			if err := parsed.Claims(key.Public(), &public, &private, &all); err != nil {
				t.Fatalf("verifying with the public key: %v", err)
			}
			if public.Issuer != "kubernetes/serviceaccount" ||
				public.Subject != "system:serviceaccount:ns:builder" {
				t.Errorf("iss %q sub %q", public.Issuer, public.Subject)
			}
			if want := (legacyPrivate{"ns", "builder-token", "builder", "sa-uid"}); private != want {
				t.Errorf("private claims %+v, want %+v", private, want)
			}
			if len(all) != 6 {
				t.Errorf("claims %v, want exactly iss, sub and the four private ones", all)
			}
			// Another key does not verify it.
			if err := parsed.Claims(NewTestKey(t, "p256").Public(), &public); err == nil {
				t.Error("the token verifies with another key")
			}
		})
	}
}

// TestSignerRefusesKeysKCMCannotSignWith: an ECDSA key on another curve
// and a key of another kind are errors that say what is accepted.
func TestSignerRefusesKeysKCMCannotSignWith(t *testing.T) {
	for _, tt := range []struct{ kind, want string }{
		{"p224", "only P-256, P-384 and P-521"},
		{"ed25519", "use an RSA or ECDSA private key"},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			_, err := newSigner(NewTestKey(t, tt.kind))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
