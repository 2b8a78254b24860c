//go:build integration

package differential_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ctrlhost/ctrlhost/controllers/csrapproving"
	"github.com/ctrlhost/ctrlhost/testenv"
	"github.com/ctrlhost/ctrlhost/upstream/differential"
)

// The bootstrap ClusterRoles the certificate scenarios bind to users: to
// create CSRs, and to have a kubelet client CSR approved for any node or
// for oneself.
const (
	csrCreator      = "system:node-bootstrapper"
	nodeClientRole  = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
	selfClientRole  = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
	kubeletClient   = certv1.KubeAPIServerClientKubeletSignerName
	csrPollInterval = 100 * time.Millisecond
)

// subject is what a certificate request asks for.
type subject struct {
	cn      string
	orgs    []string
	dnsName string
	ip      string
}

// node is the subject of a kubelet's request for node.
func node(name string) subject {
	return subject{cn: "system:node:" + name, orgs: []string{"system:nodes"}}
}

// certRequest returns a PEM certificate request for s over a new key.
func certRequest(t *testing.T, s subject) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: s.cn, Organization: s.orgs}}
	if s.dnsName != "" {
		tmpl.DNSNames = []string{s.dnsName}
	}
	if s.ip != "" {
		tmpl.IPAddresses = []net.IP{net.ParseIP(s.ip)}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// csrUser returns a client authenticated as user, with a client
// certificate the API server trusts.
func csrUser(t *testing.T, e *testenv.Env, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), strings.ReplaceAll(user, ":", "-"))
	certFile, keyFile, err := e.WriteClientCert(prefix, user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: e.APIServerURL(),
		TLSClientConfig: rest.TLSClientConfig{CAFile: e.PKI().CAFile, CertFile: certFile,
			KeyFile: keyFile}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// csrCase is one CSR a certificate scenario creates.
type csrCase struct {
	name    string
	signer  string
	request []byte
	usages  []certv1.KeyUsage
	// by creates it; nil: the administrator.
	by kubernetes.Interface
	// expirationSeconds, when not zero, is spec.expirationSeconds.
	expirationSeconds int32
}

// createCSR creates c as ns+"-"+c.name, labelled with ns. A user's create
// is retried while the API server's authorizer has not yet seen the
// user's new bindings.
func createCSR(ctx context.Context, admin kubernetes.Interface, ns string,
	c csrCase) (*certv1.CertificateSigningRequest, error) {
	cs := c.by
	if cs == nil {
		cs = admin
	}
	obj := &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + c.name,
			Labels: map[string]string{"differential": ns}},
		Spec: certv1.CertificateSigningRequestSpec{Request: c.request, SignerName: c.signer,
			Usages: c.usages},
	}
	if c.expirationSeconds != 0 {
		obj.Spec.ExpirationSeconds = &c.expirationSeconds
	}
	var created *certv1.CertificateSigningRequest
	err := wait.PollUntilContextTimeout(ctx, csrPollInterval, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			var err error
			created, err = cs.CertificatesV1().CertificateSigningRequests().Create(ctx, obj,
				metav1.CreateOptions{})
			if apierrors.IsForbidden(err) {
				return false, nil
			}
			return err == nil, err
		})
	return created, err
}

// decide adds an Approved (or Denied) condition to the CSR, as an
// administrator's kubectl certificate approve (deny) does.
func decide(ctx context.Context, cs kubernetes.Interface, r *certv1.CertificateSigningRequest,
	t certv1.RequestConditionType) error {
	r.Status.Conditions = append(r.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: t, Status: "True", Reason: "Differential", Message: "decided by the scenario",
	})
	_, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, r.Name, r,
		metav1.UpdateOptions{})
	return err
}

// bindUsers binds the ClusterRole to the users, in a binding labelled
// with ns.
func bindUsers(ctx context.Context, cs kubernetes.Interface, ns, role string,
	users ...string) error {
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + strings.ReplaceAll(role, ":", "-"),
			Labels: map[string]string{"differential": ns}},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
	}
	for _, u := range users {
		b.Subjects = append(b.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName,
			Kind: rbacv1.UserKind, Name: u})
	}
	_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})
	return err
}

// csrsOf lists the CSRs labelled with ns; certificates are replaced by
// what summary says of them (nil: removed).
func csrsOf(summary func(*certv1.CertificateSigningRequest) string) func(context.Context,
	kubernetes.Interface, string) ([]runtime.Object, error) {
	return func(ctx context.Context, cs kubernetes.Interface, ns string) ([]runtime.Object,
		error) {
		l, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx,
			metav1.ListOptions{LabelSelector: "differential=" + ns})
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			r := &l.Items[i]
			r.Kind = "CertificateSigningRequest"
			if summary != nil && len(r.Status.Certificate) > 0 {
				if r.Annotations == nil {
					r.Annotations = map[string]string{}
				}
				r.Annotations["differential/certificate"] = summary(r)
			}
			r.Status.Certificate = nil
		}
		return objects(l.Items,
			func(r *certv1.CertificateSigningRequest) runtime.Object { return r }), nil
	}
}

// cleanupCSRs deletes the CSRs and ClusterRoleBindings labelled with ns.
func cleanupCSRs(ctx context.Context, cs kubernetes.Interface, ns string) error {
	sel := metav1.ListOptions{LabelSelector: "differential=" + ns}
	if err := cs.CertificatesV1().CertificateSigningRequests().DeleteCollection(ctx,
		metav1.DeleteOptions{}, sel); err != nil {
		return err
	}
	return cs.RbacV1().ClusterRoleBindings().DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
}

// conditions counts the conditions of type t in state whose message is
// message ("" any).
func conditions(state []map[string]any, t certv1.RequestConditionType, message string) int {
	n := 0
	for _, o := range state {
		st, _ := o["status"].(map[string]any)
		cs, _ := st["conditions"].([]any)
		for _, c := range cs {
			m, _ := c.(map[string]any)
			if m["type"] == string(t) && (message == "" || m["message"] == message) {
				n++
			}
		}
	}
	return n
}

// TestCSRApproving: kubelet client CSRs are approved when their requester
// may have them approved (a bootstrap user for any node, a node for its
// own renewal, an administrator); a node renewing another node's, a node
// without the permission, a request with a server usage, a serving
// request and a denied request are left alone.
func TestCSRApproving(t *testing.T) {
	e := env(t)
	bootstrapper := csrUser(t, e, "system:bootstrap:abcdef", "system:bootstrappers")
	n2 := csrUser(t, e, "system:node:n2", "system:nodes")
	n3 := csrUser(t, e, "system:node:n3", "system:nodes")
	client := []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment,
		certv1.UsageClientAuth}
	serving := node("n2")
	serving.dnsName = "n2.example"
	// The same requests on both sides: spec.request compares equal.
	cases := []csrCase{
		{name: "bootstrap", signer: kubeletClient, by: bootstrapper, usages: client,
			request: certRequest(t, node("n1"))},
		{name: "renewal", signer: kubeletClient, by: n2, usages: client,
			request: certRequest(t, node("n2"))},
		{name: "other-node", signer: kubeletClient, by: n2, usages: client,
			request: certRequest(t, node("n4"))},
		{name: "unauthorized", signer: kubeletClient, by: n3, usages: client,
			request: certRequest(t, node("n3"))},
		{name: "admin", signer: kubeletClient, usages: client,
			request: certRequest(t, node("n6"))},
		{name: "server-usage", signer: kubeletClient,
			request: certRequest(t, node("n6")), usages: []certv1.KeyUsage{
				certv1.UsageDigitalSignature, certv1.UsageServerAuth}},
		{name: "serving", signer: certv1.KubeletServingSignerName, by: n2,
			request: certRequest(t, serving), usages: []certv1.KeyUsage{
				certv1.UsageDigitalSignature, certv1.UsageServerAuth}},
		{name: "denied", signer: kubeletClient, usages: client,
			request: certRequest(t, node("n5"))},
	}
	res := compare(t, differential.Scenario{
		Name:       "csr-approving approves kubelet client requests it may",
		Controller: csrapproving.Name,
		Setup: func(ctx context.Context, cs kubernetes.Interface, ns string) error {
			// The approval permissions first: once a user's create
			// succeeds, its later binding is visible to the authorizer,
			// and so are these.
			for _, b := range []struct {
				role  string
				users []string
			}{
				{nodeClientRole, []string{"system:bootstrap:abcdef"}},
				{selfClientRole, []string{"system:node:n2"}},
				{csrCreator, []string{"system:bootstrap:abcdef", "system:node:n2",
					"system:node:n3"}},
			} {
				if err := bindUsers(ctx, cs, ns, b.role, b.users...); err != nil {
					return err
				}
			}
			for _, c := range cases {
				r, err := createCSR(ctx, cs, ns, c)
				if err != nil {
					return err
				}
				if c.name == "denied" {
					if err := decide(ctx, cs, r, certv1.CertificateDenied); err != nil {
						return err
					}
				}
			}
			return nil
		},
		Observe: csrsOf(nil),
		Settled: func(state []map[string]any) bool {
			return conditions(state, certv1.CertificateApproved, "") == 3
		},
		Cleanup: cleanupCSRs,
	})
	if n := conditions(res.Native, certv1.CertificateApproved,
		csrapproving.SelfNodeMessage); n != 1 {
		t.Errorf("native side: %d self-renewal approvals, want 1", n)
	}
	if n := conditions(res.Native, certv1.CertificateApproved, csrapproving.NodeMessage); n != 2 {
		t.Errorf("native side: %d node client approvals, want 2", n)
	}
}
