package testenv

import (
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/csv"
	"encoding/pem"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRenderTokenFile(t *testing.T) {
	entries := []tokenEntry{
		{token: "t0", user: User{Name: AdminUser, Groups: []string{"system:masters"}}},
		{token: "t1", user: User{Name: "alice", UID: "uid-1", Groups: []string{"dev", "ops"}}},
		{token: "t2", user: User{Name: "bob"}},
		{token: "t3", user: User{Name: `carol "c"`, UID: "u3", Groups: []string{"g"}}},
	}
	got, err := renderTokenFile(entries)
	if err != nil {
		t.Fatalf("renderTokenFile: %v", err)
	}
	want := "t0," + AdminUser + ",,system:masters\n" +
		"t1,alice,uid-1,\"dev,ops\"\n" +
		"t2,bob,\n" +
		"t3,\"carol \"\"c\"\"\",u3,g\n"
	if string(got) != want {
		t.Errorf("token file:\n%s\nwant:\n%s", got, want)
	}

	// Read it back the way the API server does: CSV, groups split on commas.
	r := csv.NewReader(strings.NewReader(string(got)))
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if len(records) != len(entries) {
		t.Fatalf("read back %d records, want %d", len(records), len(entries))
	}
	for i, rec := range records {
		e := entries[i]
		if rec[0] != e.token || rec[1] != e.user.Name || rec[2] != e.user.UID {
			t.Errorf("record %d = %q, want token %q user %q uid %q", i, rec, e.token, e.user.Name, e.user.UID)
		}
		var groups []string
		if len(rec) > 3 {
			groups = strings.Split(rec[3], ",")
		}
		if !slices.Equal(groups, e.user.Groups) {
			t.Errorf("record %d groups = %q, want %q", i, groups, e.user.Groups)
		}
	}
}

func TestNewToken(t *testing.T) {
	a, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	b, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || len(a) < 32 || strings.ContainsAny(a, ",\"\n") {
		t.Errorf("tokens %q and %q: want distinct, long, CSV-safe", a, b)
	}
}

func TestNewPKI(t *testing.T) {
	now := time.Now()
	p, err := newPKI(now)
	if err != nil {
		t.Fatalf("newPKI: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.caPEM) {
		t.Fatal("CA PEM does not parse")
	}
	pair, err := tls.X509KeyPair(p.servingPEM, p.servingKey)
	if err != nil {
		t.Fatalf("serving certificate and key do not match: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"127.0.0.1", "localhost", "kubernetes.default.svc"} {
		if _, err := leaf.Verify(x509.VerifyOptions{
			DNSName:     name,
			Roots:       roots,
			CurrentTime: now,
			KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}); err != nil {
			t.Errorf("serving certificate does not verify for %s: %v", name, err)
		}
	}
	for _, name := range []string{"127.0.0.2", "example.com"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now}); err == nil {
			t.Errorf("serving certificate verifies for %s, want an error", name)
		}
	}
	if !slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.IPv4(127, 0, 0, 1)) }) {
		t.Errorf("serving certificate IPs %v lack 127.0.0.1", leaf.IPAddresses)
	}

	// A different PKI's CA must not vouch for this serving certificate.
	other, err := newPKI(now)
	if err != nil {
		t.Fatal(err)
	}
	otherRoots := x509.NewCertPool()
	otherRoots.AppendCertsFromPEM(other.caPEM)
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: otherRoots, CurrentTime: now}); err == nil {
		t.Error("serving certificate verifies against another CA")
	}

	keyBlock, _ := pem.Decode(p.saKey)
	if keyBlock == nil {
		t.Fatal("service account key PEM does not parse")
	}
	key, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, ok := key.(*rsa.PrivateKey)
	if !ok {
		t.Fatalf("service account key is %T, want RSA", key)
	}
	pubBlock, _ := pem.Decode(p.saPub)
	if pubBlock == nil {
		t.Fatal("service account public key PEM does not parse")
	}
	pub, err := x509.ParsePKIXPublicKey(pubBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !rsaKey.PublicKey.Equal(pub) {
		t.Error("service account public key does not belong to the private key")
	}
}

// TestPKIKeysAndClientCertificates: the CA key signs for the CA, the
// front-proxy client certificate verifies against the front-proxy CA only,
// and client certificates verify against the cluster CA for client use,
// with the user and groups as subject.
func TestPKIKeysAndClientCertificates(t *testing.T) {
	p, err := newPKI(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(p.caPEM, p.caKeyPEM); err != nil {
		t.Errorf("the CA key does not match the CA certificate: %v", err)
	}
	pool := func(pemData []byte) *x509.CertPool {
		cp := x509.NewCertPool()
		if !cp.AppendCertsFromPEM(pemData) {
			t.Fatal("no certificate in PEM")
		}
		return cp
	}
	verify := func(certPEM []byte, roots *x509.CertPool) (*x509.Certificate, error) {
		block, _ := pem.Decode(certPEM)
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return c, err
	}
	if c, err := verify(p.frontProxyCert, pool(p.frontProxyCAPEM)); err != nil || c.Subject.CommonName != FrontProxyClientName {
		t.Errorf("front-proxy client certificate: CN %q, %v", c.Subject.CommonName, err)
	}
	if _, err := verify(p.frontProxyCert, pool(p.caPEM)); err == nil {
		t.Error("the front-proxy client certificate verifies against the cluster CA; the CAs must differ")
	}
	certPEM, keyPEM, err := clientCert(p.caCert, p.caKey, "system:kube-controller-manager", []string{"g1", "g2"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Errorf("client key does not match: %v", err)
	}
	c, err := verify(certPEM, pool(p.caPEM))
	if err != nil || c.Subject.CommonName != "system:kube-controller-manager" || strings.Join(c.Subject.Organization, ",") != "g1,g2" {
		t.Errorf("client certificate: subject %v, %v", c.Subject, err)
	}
}
