package csrsigning_test

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/spf13/pflag"
	certv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ctrlhost/ctrlhost/controllers/csrsigning"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/internal/csr/csrtest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptor(t *testing.T) {
	controllertest.CheckIdentity(t, csrsigning.Descriptor(csrsigning.NewOptions()),
		controllertest.Identity{
			Name: "certificatesigningrequest-signing-controller", Alias: "csrsigning"})
}

// TestFlags: KCM's flags, with KCM's defaults, bound to the options.
func TestFlags(t *testing.T) {
	var names []string
	o := csrsigning.NewOptions()
	fs := controllertest.FlagSet(o.AddFlags)
	fs.VisitAll(func(f *pflag.Flag) {
		names = append(names, f.Name)
		want := ""
		if f.Name == "cluster-signing-duration" {
			want = "8760h0m0s"
		}
		if f.DefValue != want {
			t.Errorf("--%s defaults to %q, want %q", f.Name, f.DefValue, want)
		}
	})
	want := []string{"cluster-signing-cert-file", "cluster-signing-duration",
		"cluster-signing-key-file"}
	for _, s := range []string{"kubelet-serving", "kubelet-client", "kube-apiserver-client",
		"legacy-unknown"} {
		want = append(want, "cluster-signing-"+s+"-cert-file", "cluster-signing-"+s+"-key-file")
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("flags %q, want %q", names, want)
	}
	if err := fs.Parse([]string{"--cluster-signing-duration=24h",
		"--cluster-signing-kubelet-serving-cert-file=c",
		"--cluster-signing-kubelet-serving-key-file=k",
		"--cluster-signing-legacy-unknown-key-file=lk"}); err != nil {
		t.Fatal(err)
	}
	if o.ClusterSigningDuration != 24*time.Hour ||
		o.KubeletServing != (csrsigning.Files{CertFile: "c", KeyFile: "k"}) ||
		o.LegacyUnknown.KeyFile != "lk" {
		t.Errorf("options %+v", o)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	both := csrsigning.Files{CertFile: "c", KeyFile: "k"}
	tests := []struct {
		name    string
		o       func(*csrsigning.Options)
		wantErr []string
	}{
		{"defaults", func(*csrsigning.Options) {}, nil},
		{"cluster-wide pair", func(o *csrsigning.Options) {
			o.ClusterSigningCertFile, o.ClusterSigningKeyFile = "c", "k"
		}, nil},
		{"one signer", func(o *csrsigning.Options) { o.KubeAPIServerClient = both }, nil},
		{"cluster-wide cert without key", func(o *csrsigning.Options) {
			o.ClusterSigningCertFile = "c"
		}, []string{"--cluster-signing-cert-file is set without --cluster-signing-key-file"}},
		{"a signer's key without cert", func(o *csrsigning.Options) {
			o.KubeletClient.KeyFile = "k"
		}, []string{"--cluster-signing-kubelet-client-key-file is set without " +
			"--cluster-signing-kubelet-client-cert-file"}},
		{"both kinds", func(o *csrsigning.Options) {
			o.ClusterSigningCertFile, o.ClusterSigningKeyFile = "c", "k"
			o.LegacyUnknown = both
		}, []string{"per-signer --cluster-signing-*-{cert,key}-file flags are both set"}},
		{"no duration", func(o *csrsigning.Options) { o.ClusterSigningDuration = 0 },
			[]string{"--cluster-signing-duration: must be positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := csrsigning.NewOptions()
			tt.o(&o)
			controllertest.CheckBuild(t, csrsigning.Descriptor(o), tt.wantErr...)
		})
	}
}

// writeCA writes a CA valid for a day and returns it and its files.
func writeCA(t *testing.T) (*csrtest.CA, csrsigning.Files) {
	t.Helper()
	ca := csrtest.NewCA(t, "ca", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	dir := t.TempDir()
	f := csrsigning.Files{CertFile: filepath.Join(dir, "ca.crt"),
		KeyFile: filepath.Join(dir, "ca.key")}
	if err := os.WriteFile(f.CertFile, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.KeyFile, ca.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca, f
}

func TestNotStartedWithoutACA(t *testing.T) {
	c, err := controllertest.Init(t, csrsigning.Descriptor(csrsigning.NewOptions()), nil)
	if c != nil || err != nil {
		t.Errorf("Init = %v, %v; want (nil, nil): KCM skips the controller", c, err)
	}
}

func TestUnreadableCAFailsTheStart(t *testing.T) {
	o := csrsigning.NewOptions()
	o.KubeletServing = csrsigning.Files{CertFile: "/nonexistent/ca.crt",
		KeyFile: "/nonexistent/ca.key"}
	if c, err := controllertest.Init(t, csrsigning.Descriptor(o), nil); err == nil {
		t.Errorf("Init = %v, nil; want an error", c)
	}
}

func TestCheckRunWithCancelledContext(t *testing.T) {
	_, f := writeCA(t)
	o := csrsigning.NewOptions()
	o.ClusterSigningCertFile, o.ClusterSigningKeyFile = f.CertFile, f.KeyFile
	controllertest.CheckRunWithCancelledContext(t, csrsigning.Descriptor(o))
}

// TestManagerSignsApprovedRequests: under a Manager with only the
// kube-apiserver-client signer's files, an approved request of that
// signer is signed; one of the kubelet-serving signer is not.
func TestManagerSignsApprovedRequests(t *testing.T) {
	ca, f := writeCA(t)
	o := csrsigning.NewOptions()
	o.KubeAPIServerClient = f
	usages := []certv1.KeyUsage{certv1.UsageClientAuth}
	client := csrtest.With(csrtest.CSR("client", certv1.KubeAPIServerClientSignerName, "u",
		csrtest.Request(t, csrtest.Subject{CommonName: "alice"}), usages...),
		certv1.CertificateApproved, time.Now())
	serving := csrtest.With(csrtest.CSR("serving", certv1.KubeletServingSignerName, "u",
		csrtest.Request(t, csrtest.Node("n1")), usages...),
		certv1.CertificateApproved, time.Now())
	h := managertest.New(t, "test", []descriptor.Descriptor{csrsigning.Descriptor(o)},
		client, serving).Start()
	get := func(name string) *certv1.CertificateSigningRequest {
		r, err := h.Client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), name,
			metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	controllertest.WaitFor(t, "the client request signed", func() bool {
		return len(get("client").Status.Certificate) > 0
	})
	block, _ := pem.Decode(get("client").Status.Certificate)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckSignatureFrom(ca.Cert); err != nil || cert.Subject.CommonName != "alice" {
		t.Errorf("certificate for %q: %v", cert.Subject.CommonName, err)
	}
	h.WaitHealthy("/readyz")
	if r := get("serving"); len(r.Status.Certificate) > 0 || len(r.Status.Conditions) != 1 {
		t.Errorf("the serving request was handled: %+v", r.Status)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
