//go:build integration

package e2e

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestServiceAccountTokenSecret: a legacy token Secret naming a
// ServiceAccount is filled by the token controller with a token signed by
// --service-account-private-key-file for that account, the
// --root-ca-file CA and the namespace.
func TestServiceAccountTokenSecret(t *testing.T) {
	t.Parallel()
	cs, ns := setup(t)
	ctx := t.Context()
	sa, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "builder-token",
			Annotations: map[string]string{corev1.ServiceAccountNameKey: sa.Name},
		},
		Type: corev1.SecretTypeServiceAccountToken,
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Secret
	eventually(t, waitTimeout, "the token controller to fill Secret builder-token", func(ctx context.Context) error {
		got, err = cs.CoreV1().Secrets(ns).Get(ctx, "builder-token", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, k := range []string{corev1.ServiceAccountTokenKey, corev1.ServiceAccountRootCAKey, corev1.ServiceAccountNamespaceKey} {
			if len(got.Data[k]) == 0 {
				return fmt.Errorf("no %q yet; keys %v", k, keys(got.Data))
			}
		}
		return nil
	})
	if ns2 := string(got.Data[corev1.ServiceAccountNamespaceKey]); ns2 != ns {
		t.Errorf("namespace %q, want %q", ns2, ns)
	}
	if !bytes.Equal(got.Data[corev1.ServiceAccountRootCAKey], dropIn.rootCA) {
		t.Errorf("ca.crt is not the --root-ca-file CA:\n%s", got.Data[corev1.ServiceAccountRootCAKey])
	}
	if uid := got.Annotations[corev1.ServiceAccountUIDKey]; uid != string(sa.UID) {
		t.Errorf("annotation %s = %q, want the ServiceAccount's UID %q", corev1.ServiceAccountUIDKey, uid, sa.UID)
	}
	claims, err := verifyRS256(string(got.Data[corev1.ServiceAccountTokenKey]), dropIn.saKey)
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	if want := "system:serviceaccount:" + ns + ":builder"; claims["sub"] != want {
		t.Errorf("token subject %v, want %s", claims["sub"], want)
	}
	if claims["kubernetes.io/serviceaccount/secret.name"] != "builder-token" {
		t.Errorf("token claims %v, want secret.name builder-token", claims)
	}
}

// verifyRS256 checks a compact JWS signed with the key's private half and
// returns its claims.
func verifyRS256(token string, key *rsa.PublicKey) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%d parts, want 3", len(parts))
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if err := decodeSegment(parts[0], &header); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if header.Alg != "RS256" {
		return nil, fmt.Errorf("alg %q, want RS256", header.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig); err != nil {
		return nil, fmt.Errorf("not signed by --service-account-private-key-file: %w", err)
	}
	var claims map[string]any
	if err := decodeSegment(parts[1], &claims); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	return claims, nil
}

func decodeSegment(seg string, into any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestBootstrapSigner: kube-public's cluster-info gets a detached JWS of
// its kubeconfig for each bootstrap token allowed to sign, made with that
// token's secret.
func TestBootstrapSigner(t *testing.T) {
	t.Parallel()
	cs := startKCM(t)
	timed(t)
	ctx := t.Context()
	id, secret := randomString(t, 6), randomString(t, 16)
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: https://127.0.0.1:6443\n"
	if _, err := cs.CoreV1().ConfigMaps(metav1.NamespacePublic).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-info"},
		Data:       map[string]string{"kubeconfig": kubeconfig},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id":                id,
			"token-secret":            secret,
			"usage-bootstrap-signing": "true",
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	key := "jws-kubeconfig-" + id
	var jws string
	eventually(t, waitTimeout, "cluster-info to get "+key, func(ctx context.Context) error {
		cm, err := cs.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, "cluster-info", metav1.GetOptions{})
		if err != nil {
			return err
		}
		jws = cm.Data[key]
		if jws == "" {
			return fmt.Errorf("keys %v", keys(cm.Data))
		}
		return nil
	})
	if err := verifyDetachedHS256(jws, kubeconfig, id, secret); err != nil {
		t.Errorf("%s = %q: %v", key, jws, err)
	}
}

// verifyDetachedHS256 checks a JWS with detached content, keyed by the
// token's secret and naming the token's ID.
func verifyDetachedHS256(jws, content, id, secret string) error {
	parts := strings.Split(jws, ".")
	if len(parts) != 3 || parts[1] != "" {
		return errors.New("not a JWS with detached content (header..signature)")
	}
	var header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodeSegment(parts[0], &header); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if header.Alg != "HS256" || header.Kid != id {
		return fmt.Errorf("header alg %q kid %q, want HS256 and %q", header.Alg, header.Kid, id)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(content))))
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return errors.New("signature does not match the token secret over the kubeconfig")
	}
	return nil
}

// randomString is n characters of [a-z0-9], a bootstrap token's alphabet.
func randomString(t *testing.T, n int) string {
	t.Helper()
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// TestCSRSigning: a CSR for kubernetes.io/kube-apiserver-client, once
// approved, is issued a client certificate by --cluster-signing-cert-file's
// CA, for the requested subject and key.
func TestCSRSigning(t *testing.T) {
	t.Parallel()
	cs, ns := setup(t)
	ctx := t.Context()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "e2e-user", Organization: []string{"e2e-group"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	name := ns + "-client"
	csr, err := cs.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        certificatesv1.KubeAPIServerClientSignerName,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			ExpirationSeconds: new(int32(3600)),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "E2EApproved", Message: "approved by the e2e test",
	})
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var issued []byte
	eventually(t, waitTimeout, "CSR "+name+" to be issued a certificate", func(ctx context.Context) error {
		got, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if issued = got.Status.Certificate; len(issued) == 0 {
			return fmt.Errorf("no certificate; conditions %v", got.Status.Conditions)
		}
		return nil
	})
	block, _ := pem.Decode(issued)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("status.certificate is not a PEM certificate:\n%s", issued)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(dropIn.signing)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the certificate does not verify as a client certificate of the signing CA: %v", err)
	}
	if cert.Subject.CommonName != "e2e-user" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "e2e-group" {
		t.Errorf("subject %v, want CN=e2e-user, O=e2e-group", cert.Subject)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		t.Error("the certificate is not for the requested key")
	}
}
