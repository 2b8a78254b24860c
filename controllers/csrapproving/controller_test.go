package csrapproving

import (
	"errors"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/csr/csrtest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

const kubeletClient = certv1.KubeAPIServerClientKubeletSignerName

var clientUsages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth}

// request builds a CSR named "r" for signer from user asking for node's
// client certificate.
func request(t *testing.T, signer, user string, s csrtest.Subject,
	usages ...certv1.KeyUsage) *certv1.CertificateSigningRequest {
	r := csrtest.CSR("r", signer, user, csrtest.Request(t, s), usages...)
	r.Spec.UID = "uid-of-" + user
	r.Spec.Groups = []string{"system:nodes", "system:authenticated"}
	r.Spec.Extra = map[string]certv1.ExtraValue{"scopes": {"a", "b"}}
	return r
}

func TestSync(t *testing.T) {
	self := func() *certv1.CertificateSigningRequest {
		return request(t, kubeletClient, "system:node:n1", csrtest.Node("n1"), clientUsages...)
	}
	bootstrap := func() *certv1.CertificateSigningRequest {
		return request(t, kubeletClient, "system:bootstrap:abcdef", csrtest.Node("n1"),
			certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment, certv1.UsageClientAuth)
	}
	withDNS := csrtest.Node("n1")
	withDNS.DNSNames = []string{"n1.example"}
	tests := []struct {
		name     string
		csr      *certv1.CertificateSigningRequest
		allow    []string // subresources the reviews allow
		sarErr   error
		writeErr error
		wantSARs []string // subresources asked, in order
		want     string   // the approval message written; "" none
		wantErr  bool
	}{
		{name: "own renewal, selfnodeclient allowed", csr: self(),
			allow: []string{"selfnodeclient"}, wantSARs: []string{"selfnodeclient"},
			want: SelfNodeMessage},
		{name: "own renewal, only nodeclient allowed", csr: self(),
			allow: []string{"nodeclient"}, wantSARs: []string{"selfnodeclient", "nodeclient"},
			want: NodeMessage},
		{name: "bootstrap: selfnodeclient not asked", csr: bootstrap(),
			allow: []string{"selfnodeclient", "nodeclient"}, wantSARs: []string{"nodeclient"},
			want: NodeMessage},
		{name: "nothing allowed: retried", csr: self(),
			wantSARs: []string{"selfnodeclient", "nodeclient"}, wantErr: true},
		{name: "review fails: retried", csr: bootstrap(), sarErr: errors.New("boom"),
			wantSARs: []string{"nodeclient"}, wantErr: true},
		{name: "approval write fails: retried", csr: bootstrap(), allow: []string{"nodeclient"},
			writeErr: errors.New("boom"), wantSARs: []string{"nodeclient"}, want: NodeMessage,
			wantErr: true},
		{name: "server auth usage: not a kubelet client request",
			csr: request(t, kubeletClient, "u", csrtest.Node("n1"),
				certv1.UsageDigitalSignature, certv1.UsageServerAuth),
			allow: []string{"nodeclient"}},
		{name: "a DNS name: not a kubelet client request",
			csr:   request(t, kubeletClient, "u", withDNS, clientUsages...),
			allow: []string{"nodeclient"}},
		{name: "other organization: not a kubelet client request",
			csr: request(t, kubeletClient, "u", csrtest.Subject{CommonName: "system:node:n1"},
				clientUsages...),
			allow: []string{"nodeclient"}},
		{name: "other signer: left alone",
			csr: request(t, certv1.KubeAPIServerClientSignerName, "u", csrtest.Node("n1"),
				clientUsages...),
			allow: []string{"nodeclient"}},
		{name: "approved already", allow: []string{"nodeclient"},
			csr: csrtest.With(bootstrap(), certv1.CertificateApproved, time.Now())},
		{name: "denied", allow: []string{"nodeclient"},
			csr: csrtest.With(bootstrap(), certv1.CertificateDenied, time.Now())},
		{name: "issued", allow: []string{"nodeclient"},
			csr: func() *certv1.CertificateSigningRequest {
				r := bootstrap()
				r.Status.Certificate = []byte("x")
				return r
			}()},
		{name: "failed but undecided: still approved", allow: []string{"nodeclient"},
			csr:      csrtest.With(bootstrap(), certv1.CertificateFailed, time.Now()),
			wantSARs: []string{"nodeclient"}, want: NodeMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.csr.DeepCopy())
			client.PrependReactor("create", "subjectaccessreviews",
				func(a k8stesting.Action) (bool, runtime.Object, error) {
					sar := review(a)
					checkReview(t, tt.csr, sar)
					if tt.sarErr != nil {
						return true, nil, tt.sarErr
					}
					sar.Status.Allowed = slices.Contains(tt.allow,
						sar.Spec.ResourceAttributes.Subresource)
					return true, sar, nil
				})
			if tt.writeErr != nil {
				client.PrependReactor("update", "certificatesigningrequests",
					func(k8stesting.Action) (bool, runtime.Object, error) {
						return true, nil, tt.writeErr
					})
			}
			client.ClearActions()
			c := &controller{client: client, csrs: certlisters.NewCertificateSigningRequestLister(
				controllertest.ClusterIndexer(t, tt.csr))}
			err := c.sync(controllertest.LogContext(t), "r")
			if (err != nil) != tt.wantErr {
				t.Errorf("sync error %v, want error %v", err, tt.wantErr)
			}
			var sars []string
			var written []certv1.CertificateSigningRequestCondition
			for _, a := range client.Actions() {
				switch a.GetVerb() + " " + a.GetResource().Resource {
				case "create subjectaccessreviews":
					sar := review(a)
					sars = append(sars, sar.Spec.ResourceAttributes.Subresource)
				case "update certificatesigningrequests":
					if a.GetSubresource() != "approval" {
						t.Errorf("update of %q, want the approval subresource", a.GetSubresource())
					}
					obj := a.(k8stesting.UpdateAction).GetObject()
					written = obj.(*certv1.CertificateSigningRequest).Status.Conditions
				default:
					t.Errorf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
			if !slices.Equal(sars, tt.wantSARs) {
				t.Errorf("reviews of %q, want %q", sars, tt.wantSARs)
			}
			checkApproval(t, tt.csr, written, tt.want)
		})
	}
}

func review(a k8stesting.Action) *authorizationv1.SubjectAccessReview {
	return a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
}

// checkReview checks that a review asks, for the CSR's requester, whether
// it may create a certificatesigningrequests subresource.
func checkReview(t *testing.T, r *certv1.CertificateSigningRequest,
	sar *authorizationv1.SubjectAccessReview) {
	t.Helper()
	s := sar.Spec
	if s.User != r.Spec.Username || s.UID != r.Spec.UID || !slices.Equal(s.Groups, r.Spec.Groups) ||
		len(s.Extra) != 1 || !slices.Equal(s.Extra["scopes"], []string{"a", "b"}) {
		t.Errorf("review of %s/%s %v %v, want the requester's", s.User, s.UID, s.Groups, s.Extra)
	}
	a := s.ResourceAttributes
	if a == nil || a.Group != "certificates.k8s.io" || a.Version != "*" ||
		a.Resource != "certificatesigningrequests" || a.Verb != "create" {
		t.Errorf("review attributes %+v", a)
	}
}

// checkApproval checks the conditions written: the CSR's own plus one
// Approved condition with KCM's reason and the message (none written when
// message is "").
func checkApproval(t *testing.T, r *certv1.CertificateSigningRequest,
	written []certv1.CertificateSigningRequestCondition, message string) {
	t.Helper()
	if message == "" {
		if written != nil {
			t.Errorf("wrote conditions %+v, want no write", written)
		}
		return
	}
	n := len(r.Status.Conditions)
	if len(written) != n+1 {
		t.Fatalf("wrote conditions %+v, want the CSR's %d and one more", written, n)
	}
	got := written[n]
	if got.Type != certv1.CertificateApproved || got.Status != corev1.ConditionTrue ||
		got.Reason != "AutoApproved" || got.Message != message {
		t.Errorf("wrote condition %+v, want Approved/True/AutoApproved %q", got, message)
	}
}

func TestSyncOfAGoneOrUnreadableCSR(t *testing.T) {
	c := &controller{csrs: certlisters.NewCertificateSigningRequestLister(
		controllertest.ClusterIndexer[*certv1.CertificateSigningRequest](t))}
	if err := c.sync(t.Context(), "gone"); err != nil {
		t.Errorf("sync of a gone CSR = %v, want nil", err)
	}
	bad := csrtest.CSR("bad", kubeletClient, "u", []byte("not PEM"), clientUsages...)
	c.csrs = certlisters.NewCertificateSigningRequestLister(controllertest.ClusterIndexer(t, bad))
	if err := c.sync(t.Context(), "bad"); !workloop.IsPermanent(err) {
		t.Errorf("sync of an unparsable request = %v, want a permanent error", err)
	}
}

func TestOnlyUndecidedKubeletClientRequestsAreQueued(t *testing.T) {
	r := func(signer string) *certv1.CertificateSigningRequest {
		return csrtest.CSR("r", signer, "u", nil)
	}
	issued := r(kubeletClient)
	issued.Status.Certificate = []byte("x")
	for _, tt := range []struct {
		name string
		obj  any
		want bool
	}{
		{"pending kubelet client", r(kubeletClient), true},
		{"other signer", r(certv1.KubeletServingSignerName), false},
		{"approved", csrtest.With(r(kubeletClient), certv1.CertificateApproved, time.Now()), false},
		{"denied", csrtest.With(r(kubeletClient), certv1.CertificateDenied, time.Now()), false},
		{"issued", issued, false},
		{"not a CSR", &corev1.Pod{}, false},
	} {
		if got := undecided(nil, tt.obj); got != tt.want {
			t.Errorf("%s: undecided = %v, want %v", tt.name, got, tt.want)
		}
	}
}
