//go:build integration

package differential_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/ctrlhost/ctrlhost/controllers/csrapproving"
	"github.com/ctrlhost/ctrlhost/controllers/csrsigning"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/testenv"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
	"github.com/ctrlhost/ctrlhost/upstream/kcm"
)

// signingDuration is both sides' --cluster-signing-duration: shorter than
// the testenv CA's year, so no certificate is cut at the CA's end.
const signingDuration = 720 * time.Hour

// signingRunner is runner with both sides' signing controller given the
// testenv cluster CA (--cluster-signing-cert-file and -key-file) and
// signingDuration.
func signingRunner(t *testing.T, e *testenv.Env) differential.Runner {
	r := runner(t, e)
	native := r.Descriptors
	pki := e.PKI()
	r.Descriptors = func(side differential.Side) []descriptor.Descriptor {
		if side == differential.Native {
			o := csrsigning.NewOptions()
			o.ClusterSigningCertFile, o.ClusterSigningKeyFile = pki.CAFile, pki.CAKeyFile
			o.ClusterSigningDuration = signingDuration
			ds := native(side)
			for i, d := range ds {
				if d.Name() == csrsigning.Name {
					ds[i] = csrsigning.Descriptor(o)
				}
			}
			return ds
		}
		o, err := kcm.NewOptions()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := o.Config(manager.NewOptions())
		if err != nil {
			t.Fatal(err)
		}
		s := &cfg.CSRSigningController
		s.ClusterSigningCertFile, s.ClusterSigningKeyFile = pki.CAFile, pki.CAKeyFile
		s.ClusterSigningDuration = metav1.Duration{Duration: signingDuration}
		ds, err := kcm.Descriptors(kcm.Config{Component: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	return r
}

// certSummary describes a CSR's certificate by what the signer decided:
// subject, issuer, names, usages, CA rights, validity length, and whether
// it chains to the CA (not its bytes, which differ by key, serial, time
// and signature).
func certSummary(roots *x509.CertPool) func(*certv1.CertificateSigningRequest) string {
	return func(r *certv1.CertificateSigningRequest) string {
		block, rest := pem.Decode(r.Status.Certificate)
		if block == nil || block.Type != "CERTIFICATE" || len(strings.TrimSpace(string(rest))) > 0 {
			return "not one PEM certificate"
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return "unparsable: " + err.Error()
		}
		chain := "verified"
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots,
			CurrentTime: cert.NotBefore.Add(time.Minute),
			KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			chain = err.Error()
		}
		var ips []string
		for _, ip := range cert.IPAddresses {
			ips = append(ips, ip.String())
		}
		return fmt.Sprintf("subject=%s issuer=%s dns=%v ips=%v keyUsage=%v extKeyUsage=%v "+
			"ca=%v validFor=%v chain=%s", cert.Subject, cert.Issuer, cert.DNSNames, ips,
			keyUsageNames(cert.KeyUsage), cert.ExtKeyUsage, cert.IsCA,
			cert.NotAfter.Sub(cert.NotBefore), chain)
	}
}

func keyUsageNames(u x509.KeyUsage) []string {
	var out []string
	for _, k := range []struct {
		bit  x509.KeyUsage
		name string
	}{
		{x509.KeyUsageDigitalSignature, "digital signature"},
		{x509.KeyUsageKeyEncipherment, "key encipherment"},
		{x509.KeyUsageCertSign, "cert sign"},
	} {
		if u&k.bit != 0 {
			out = append(out, k.name)
		}
	}
	return out
}

// issued lists the certificate summaries of state by CSR name.
func issued(state []map[string]any) map[string]string {
	out := map[string]string{}
	for _, o := range state {
		md, _ := o["metadata"].(map[string]any)
		a, _ := md["annotations"].(map[string]any)
		if s, ok := a["differential/certificate"].(string); ok {
			out[nameOf(o)] = s
		}
	}
	return out
}

func nameOf(o map[string]any) string {
	md, _ := o["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}

// TestCSRSigning: with the cluster CA, approved requests of the three
// kubernetes.io signers a v1 client can ask for are signed (a kubelet
// client request approved by the approving controller, the others by
// the scenario), each certificate chaining to the CA with the usages and
// length asked for; requests their signer refuses are Failed with KCM's
// messages; pending, denied and custom-signer requests are left alone.
func TestCSRSigning(t *testing.T) {
	e := env(t)
	caPEM, err := os.ReadFile(filepath.Clean(e.PKI().CAFile))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("the testenv CA does not parse")
	}
	sign, encipher := certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment
	clientAuth, serverAuth := certv1.UsageClientAuth, certv1.UsageServerAuth
	servingSubject := node("n1")
	servingSubject.dnsName, servingSubject.ip = "n1.example", "10.0.0.1"
	badServing := servingSubject
	badServing.orgs = []string{"other"}
	withDNS := node("n2")
	withDNS.dnsName = "n2.example"
	alice := subject{cn: "alice", orgs: []string{"team"}}
	cases := []csrCase{
		{name: "kubelet", signer: kubeletClient, request: certRequest(t, node("n1")),
			usages: []certv1.KeyUsage{sign, encipher, clientAuth}},
		{name: "serving", signer: certv1.KubeletServingSignerName, expirationSeconds: 3600,
			request: certRequest(t, servingSubject),
			usages:  []certv1.KeyUsage{sign, encipher, serverAuth}},
		{name: "client", signer: certv1.KubeAPIServerClientSignerName, expirationSeconds: 600,
			request: certRequest(t, alice), usages: []certv1.KeyUsage{clientAuth, sign}},
		{name: "client-long", signer: certv1.KubeAPIServerClientSignerName,
			expirationSeconds: int32(10 * signingDuration / time.Second),
			request:           certRequest(t, alice), usages: []certv1.KeyUsage{clientAuth}},
		{name: "serving-bad", signer: certv1.KubeletServingSignerName,
			request: certRequest(t, badServing), usages: []certv1.KeyUsage{sign, serverAuth}},
		{name: "client-bad", signer: certv1.KubeAPIServerClientSignerName,
			request: certRequest(t, alice), usages: []certv1.KeyUsage{clientAuth, serverAuth}},
		{name: "kubelet-bad", signer: kubeletClient, request: certRequest(t, withDNS),
			usages: []certv1.KeyUsage{sign, clientAuth}},
		{name: "custom", signer: "example.com/custom", request: certRequest(t, alice),
			usages: []certv1.KeyUsage{clientAuth}},
		{name: "pending", signer: certv1.KubeAPIServerClientSignerName,
			request: certRequest(t, alice), usages: []certv1.KeyUsage{clientAuth}},
		{name: "denied", signer: certv1.KubeAPIServerClientSignerName,
			request: certRequest(t, alice), usages: []certv1.KeyUsage{clientAuth}},
	}
	start := time.Now()
	res, err := signingRunner(t, e).Run(t.Context(), differential.Scenario{
		Name:       "csr-signing signs what the kubernetes.io signers accept",
		Controller: csrsigning.Name,
		With:       []string{csrapproving.Name},
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			for _, c := range cases {
				r, err := createCSR(ctx, cs, ns, c)
				if err != nil {
					return err
				}
				switch c.name {
				case "kubelet", "pending": // the approving controller's, or nobody's
				case "denied":
					err = decide(ctx, cs, r, certv1.CertificateDenied)
				default:
					err = decide(ctx, cs, r, certv1.CertificateApproved)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
		Observe: csrsOf(certSummary(roots)),
		Settled: func(state []map[string]any) bool {
			return len(issued(state)) == 4 &&
				conditions(state, certv1.CertificateFailed, "") == 3
		},
		Cleanup: cleanupCSRs,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("both sides settled in %v", time.Since(start).Round(time.Millisecond))
	if d := res.Diff(); d != "" {
		t.Errorf("native and upstream differ:\n%s", d)
	}
	const ca = "issuer=CN=ctrlhost-testenv-ca"
	want := map[string]string{
		"<ns>-kubelet": "subject=CN=system:node:n1,O=system:nodes " + ca + " dns=[] ips=[] " +
			"keyUsage=[digital signature key encipherment] extKeyUsage=[clientAuth] ca=false " +
			"validFor=720h0m0s chain=verified",
		"<ns>-serving": "subject=CN=system:node:n1,O=system:nodes " + ca + " dns=[n1.example] " +
			"ips=[10.0.0.1] keyUsage=[digital signature key encipherment] " +
			"extKeyUsage=[serverAuth] ca=false validFor=1h5m0s chain=verified",
		"<ns>-client": "subject=CN=alice,O=team " + ca + " dns=[] ips=[] " +
			"keyUsage=[digital signature] extKeyUsage=[clientAuth] ca=false validFor=15m0s " +
			"chain=verified",
		"<ns>-client-long": "subject=CN=alice,O=team " + ca + " dns=[] ips=[] keyUsage=[] " +
			"extKeyUsage=[clientAuth] ca=false validFor=720h0m0s chain=verified",
	}
	got := issued(res.Native)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("native side, %s: certificate\n  %s\nwant\n  %s", name, got[name], w)
		}
	}
	for _, m := range []string{"subject organization is not system:nodes",
		"invalid usage for client certificate: server auth",
		"DNS subjectAltNames are not allowed"} {
		if conditions(res.Native, certv1.CertificateFailed, m) != 1 {
			t.Errorf("native side: no Failed condition %q", m)
		}
	}
}
