package serviceaccounttoken

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"sync"
	"testing"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// rsaKey is generated once per test binary: RSA generation is slow under
// the race detector.
var rsaKey = sync.OnceValues(
	func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) },
)

// NewTestKey returns a new private key of kind: "rsa", "p224", "p256",
// "p384", "p521" or "ed25519".
func NewTestKey(t testing.TB, kind string) crypto.Signer {
	t.Helper()
	var (
		k   crypto.Signer
		err error
	)
	switch kind {
	case "rsa":
		k, err = rsaKey()
	case "p224":
		k, err = ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	case "p256":
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "p384":
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "p521":
		k, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ed25519":
		_, k, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("unknown key kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// WriteTestKey writes a new private key of kind (see NewTestKey) as PEM to a
// file in a temporary directory and returns the file's path and the key.
func WriteTestKey(t testing.TB, kind string) (string, crypto.Signer) {
	t.Helper()
	k := NewTestKey(t, kind)
	var b []byte
	if _, ok := k.(ed25519.PrivateKey); ok {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		b = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	} else {
		var err error
		if b, err = keyutil.MarshalPrivateKeyToPEM(k); err != nil {
			t.Fatal(err)
		}
	}
	return WriteTestFile(t, "key.pem", b), k
}

// WriteTestCA writes a new self-signed CA certificate as PEM to a file in a
// temporary directory and returns the file's path and its content.
func WriteTestCA(t testing.TB) (string, []byte) {
	t.Helper()
	cert, err := certutil.NewSelfSignedCACert(
		certutil.Config{CommonName: "test-ca"},
		NewTestKey(t, "p256"),
	)
	if err != nil {
		t.Fatal(err)
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	return WriteTestFile(t, "ca.crt", b), b
}

// WriteTestFile writes b to a file named name in a new temporary directory.
func WriteTestFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
