package serving

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// selfSignedValidity is how long a generated certificate is valid, as the
// apiserver library's self-signed certificates.
const selfSignedValidity = 365 * 24 * time.Hour

// servingCert is the certificate a Server presents.
type servingCert struct {
	tls    tls.Certificate
	pem    []byte // the certificate chain, leaf first
	source string // the files, or "self-signed"
}

// loadCert reads a certificate chain and its key from PEM files. Errors
// name the flag and the path at fault.
func loadCert(certFile, keyFile string) (servingCert, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return servingCert{}, fmt.Errorf("--tls-cert-file: reading %s: %w", certFile, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return servingCert{}, fmt.Errorf("--tls-private-key-file: reading %s: %w", keyFile, err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return servingCert{}, fmt.Errorf(
			"--tls-cert-file %s and --tls-private-key-file %s: not a valid certificate and matching key: %w",
			certFile,
			keyFile,
			err,
		)
	}
	return servingCert{
		tls:    pair,
		pem:    chainPEM(pair.Certificate),
		source: certFile + ", " + keyFile,
	}, nil
}

// selfSigned generates an ECDSA P-256 key and a self-signed certificate for
// localhost, the loopback addresses and bindAddress (unless it is the
// unspecified address), valid from a little before now for a year.
func selfSigned(bindAddress string, now time.Time) (servingCert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return servingCert{}, fmt.Errorf("generating a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return servingCert{}, fmt.Errorf("generating a serial number: %w", err)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ip := net.ParseIP(bindAddress); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		ips = append(ips, ip)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: fmt.Sprintf("localhost@%d", now.Unix())},
		NotBefore: now.Add(
			-5 * time.Minute,
		), // tolerate clients whose clock is a little behind
		NotAfter:              now.Add(selfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // its own root, so a client can trust exactly this certificate
		DNSNames:              []string{"localhost"},
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return servingCert{}, fmt.Errorf("creating the certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return servingCert{}, fmt.Errorf("parsing the generated certificate: %w", err)
	}
	return servingCert{
		tls:    tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		pem:    chainPEM([][]byte{der}),
		source: "self-signed",
	}, nil
}

func chainPEM(ders [][]byte) []byte {
	var b bytes.Buffer
	for _, der := range ders {
		_ = pem.Encode(
			&b,
			&pem.Block{Type: "CERTIFICATE", Bytes: der},
		) // writes to a Buffer do not fail
	}
	return b.Bytes()
}

// selfSignedInDir returns the pair kept in dir as <name>.crt and <name>.key
// (--cert-dir): loaded when both exist, otherwise generated and written,
// the key readable by its owner only.
func selfSignedInDir(dir, name, bindAddress string, now time.Time) (servingCert, error) {
	certFile, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	_, certErr := os.Stat(certFile)
	_, keyErr := os.Stat(keyFile)
	if certErr == nil && keyErr == nil {
		c, err := loadCert(certFile, keyFile)
		if err != nil {
			return servingCert{}, fmt.Errorf("--cert-dir %s: %w", dir, err)
		}
		return c, nil
	}
	c, err := selfSigned(bindAddress, now)
	if err != nil {
		return servingCert{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.tls.PrivateKey)
	if err != nil {
		return servingCert{}, fmt.Errorf("--cert-dir %s: encoding the key: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return servingCert{}, fmt.Errorf("--cert-dir %s: %w", dir, err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		0o600); err != nil {
		return servingCert{}, fmt.Errorf("--cert-dir %s: %w", dir, err)
	}
	if err := os.WriteFile(certFile, c.pem, 0o644); err != nil {
		return servingCert{}, fmt.Errorf("--cert-dir %s: %w", dir, err)
	}
	c.source = "self-signed, kept in " + certFile
	return c, nil
}
