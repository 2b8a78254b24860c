package testenv

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/csv"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

const (
	certValidity          = 365 * 24 * time.Hour
	serviceAccountRSABits = 2048
)

// pki holds what the API server needs for TLS and service account tokens,
// PEM-encoded.
type pki struct {
	caCert     *x509.Certificate
	caKey      crypto.Signer
	caKeyPEM   []byte // the cluster CA's key, PKCS#8, for signers such as KCM's
	caPEM      []byte
	servingPEM []byte // certificate for the secure port, signed by the CA
	servingKey []byte // its private key, PKCS#8
	saKey      []byte // service account signing key, RSA, PKCS#8
	saPub      []byte // its public key, PKIX

	frontProxyCAPEM  []byte // the front-proxy CA (kubeadm's front-proxy-ca.crt)
	frontProxyCert   []byte // front-proxy-client, signed by it
	frontProxyKeyPEM []byte
}

// FrontProxyClientName is the common name of the front-proxy client
// certificate, the one name --requestheader-allowed-names allows.
const FrontProxyClientName = "front-proxy-client"

// newCA generates a self-signed CA named cn.
func newCA(cn string, now time.Time) (*x509.Certificate, []byte, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating %s key: %w", cn, err)
	}
	tmpl := &x509.Certificate{
		Subject:   pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour),
		NotAfter:  now.Add(certValidity),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature |
			x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	cert, der, err := signCert(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("creating %s certificate: %w", cn, err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key, nil
}

// clientCert signs a client certificate for user and groups with the CA;
// it returns the certificate and key as PEM.
func clientCert(ca *x509.Certificate, caKey crypto.Signer, user string, groups []string,
	now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a client key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(certValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	_, der, err := signCert(tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing a client certificate for %q: %w", user, err)
	}
	if keyPEM, err = pkcs8PEM(key); err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// servingIPs and servingDNS are the names the serving certificate is valid
// for: the loopback address the API server binds, plus the names and the
// service IP that in-cluster clients would use.
var (
	servingIPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)}
	servingDNS = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local"}
)

// newPKI generates a CA, a serving certificate signed by it, and a service
// account key pair.
func newPKI(now time.Time) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		Subject:   pkix.Name{CommonName: "ctrlhost-testenv-ca"},
		NotBefore: now.Add(-time.Hour),
		NotAfter:  now.Add(certValidity),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature |
			x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caCert, caDER, err := signCert(caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating serving key: %w", err)
	}
	srvTmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(certValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: servingIPs,
		DNSNames:    servingDNS,
	}
	_, srvDER, err := signCert(srvTmpl, caCert, srvKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	srvKeyPEM, err := pkcs8PEM(srvKey)
	if err != nil {
		return nil, fmt.Errorf("encoding serving key: %w", err)
	}

	saKey, err := rsa.GenerateKey(rand.Reader, serviceAccountRSABits)
	if err != nil {
		return nil, fmt.Errorf("generating service account key: %w", err)
	}
	saKeyPEM, err := pkcs8PEM(saKey)
	if err != nil {
		return nil, fmt.Errorf("encoding service account key: %w", err)
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("encoding service account public key: %w", err)
	}

	caKeyPEM, err := pkcs8PEM(caKey)
	if err != nil {
		return nil, fmt.Errorf("encoding CA key: %w", err)
	}
	fpCA, fpCAPEM, fpKey, err := newCA("ctrlhost-testenv-front-proxy-ca", now)
	if err != nil {
		return nil, err
	}
	fpCert, fpCertKey, err := clientCert(fpCA, fpKey, FrontProxyClientName, nil, now)
	if err != nil {
		return nil, err
	}

	return &pki{
		caCert:           caCert,
		caKey:            caKey,
		caKeyPEM:         caKeyPEM,
		frontProxyCAPEM:  fpCAPEM,
		frontProxyCert:   fpCert,
		frontProxyKeyPEM: fpCertKey,
		caPEM:            pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		servingPEM:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		servingKey:       srvKeyPEM,
		saKey:            saKeyPEM,
		saPub:            pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	}, nil
}

// signCert gives tmpl a random serial number and signs it with the parent's
// key.
func signCert(tmpl, parent *x509.Certificate, pub crypto.PublicKey,
	signer crypto.Signer) (*x509.Certificate, []byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, der, nil
}

func pkcs8PEM(key crypto.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// tokenEntry is one line of the API server's static token file.
type tokenEntry struct {
	token string
	user  User
}

// newToken returns a random bearer token.
func newToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// renderTokenFile writes entries in the format of --token-auth-file:
// token,user,uid followed, when there are groups, by one column holding the
// groups joined by commas (quoted, as CSV requires).
func renderTokenFile(entries []tokenEntry) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	for _, e := range entries {
		rec := []string{e.token, e.user.Name, e.user.UID}
		if len(e.user.Groups) > 0 {
			rec = append(rec, strings.Join(e.user.Groups, ","))
		}
		if err := w.Write(rec); err != nil {
			return nil, err
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
