package ctbpublisher_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"
	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/component-base/featuregate"

	"github.com/ctrlhost/ctrlhost/controllers/ctbpublisher"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/controllers/rootcacertpublisher"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/managertest"
)

var testCA = sync.OnceValues(func() ([]byte, error) {
	cert, _, err := certutil.GenerateSelfSignedCertKey("ctrlhost-test-ca", nil, nil)
	return cert, err
})

func caPEM(t *testing.T) []byte {
	t.Helper()
	b, err := testCA()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDescriptor(t *testing.T) {
	d := ctbpublisher.Descriptor(ctbpublisher.NewOptions())
	controllertest.CheckIdentity(t, d, controllertest.Identity{
		Name: "kube-apiserver-serving-clustertrustbundle-publisher-controller"})
	// The gate is read by the InitFunc, with its default for a host that
	// does not know it; a descriptor gate would fail such a host's Build.
	if len(d.FeatureGates()) != 0 {
		t.Errorf("descriptor gates %v", d.FeatureGates())
	}
	if got := d.Informers(); len(got) != 1 || got[0] != certv1.SchemeGroupVersion.WithResource(
		"clustertrustbundles") {
		t.Errorf("informers %v, want v1 clustertrustbundles", got)
	}
}

func TestFeatureSpecs(t *testing.T) {
	specs := ctbpublisher.FeatureSpecs()
	s, ok := specs[ctbpublisher.FeatureClusterTrustBundle]
	if len(specs) != 1 || !ok || !s.Default || s.PreRelease != featuregate.GA || s.LockToDefault {
		t.Errorf("FeatureSpecs() = %+v, want ClusterTrustBundle, GA, on, not locked (1.37)", specs)
	}
	if err := featuregate.NewFeatureGate().Add(specs); err != nil {
		t.Error(err)
	}
}

func TestRootCAFileIsSharedWithTheOtherPublisher(t *testing.T) {
	fs := pflag.NewFlagSet("kcm", pflag.ContinueOnError)
	o, root := ctbpublisher.NewOptions(), rootcacertpublisher.NewOptions()
	root.AddFlags(fs)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--root-ca-file=/etc/ca.crt"}); err != nil {
		t.Fatal(err)
	}
	if o.RootCAFile != "/etc/ca.crt" || root.RootCAFile != "/etc/ca.crt" {
		t.Errorf("--root-ca-file reached %q and %q", o.RootCAFile, root.RootCAFile)
	}
	own := ctbpublisher.NewOptions()
	if f := controllertest.ParseFlag(t, own.AddFlags, "root-ca-file"); f.DefValue != "" {
		t.Errorf("default %q, want KCM's none", f.DefValue)
	}
}

func TestValidate(t *testing.T) {
	good := writeFile(t, caPEM(t))
	bad := writeFile(t, []byte("not a certificate"))
	for _, tt := range []struct {
		name string
		o    ctbpublisher.Options
		want []string
	}{
		{name: "defaults", o: ctbpublisher.NewOptions()},
		{name: "a file", o: ctbpublisher.Options{RootCAFile: good}},
		{name: "in memory", o: ctbpublisher.Options{RootCA: caPEM(t)}},
		{name: "both", o: ctbpublisher.Options{RootCA: caPEM(t), RootCAFile: good},
			want: []string{"RootCA and --root-ca-file are both set"}},
		{name: "not PEM", o: ctbpublisher.Options{RootCAFile: bad},
			want: []string{"--root-ca-file", "not a PEM-encoded CA bundle"}},
		{name: "missing", o: ctbpublisher.Options{RootCAFile: good + ".missing"},
			want: []string{"--root-ca-file", "no such file"}},
		{name: "in memory, not PEM", o: ctbpublisher.Options{RootCA: []byte("x")},
			want: []string{"RootCA: not a PEM-encoded CA bundle"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, ctbpublisher.Descriptor(tt.o), tt.want...)
		})
	}
}

// initContext is what a host passes an InitFunc, over cs, with cfg as the
// REST configuration (nil: none, as over ready-made clients).
func initContext(t *testing.T, cs *fake.Clientset, cfg *rest.Config,
	fg featuregate.FeatureGate) descriptor.Context {
	if fg == nil {
		fg = featuregate.NewFeatureGate()
	}
	return descriptor.Context{Name: ctbpublisher.Name,
		ClientBuilder:   controllertest.ClientBuilder(cs, cfg),
		InformerFactory: informers.NewSharedInformerFactory(cs, 0),
		FeatureGate:     fg, ResyncPeriod: func() time.Duration { return time.Hour }}
}

func servedResources() []*metav1.APIResourceList {
	return []*metav1.APIResourceList{{GroupVersion: "certificates.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "clustertrustbundles"}}}}
}

// TestWhenItStarts: KCM's conditions, in KCM's order: the gate, a CA, the
// API served.
func TestWhenItStarts(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	off := featuregate.NewFeatureGate()
	if err := off.Add(ctbpublisher.FeatureSpecs()); err != nil {
		t.Fatal(err)
	}
	if err := off.Set("ClusterTrustBundle=false"); err != nil {
		t.Fatal(err)
	}
	withCA := &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: caPEM(t)}}
	withCAFile := &rest.Config{TLSClientConfig: rest.TLSClientConfig{
		CAFile: writeFile(t, caPEM(t))}}
	badCA := &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: []byte("x")}}
	for _, tt := range []struct {
		name      string
		o         ctbpublisher.Options
		cfg       *rest.Config
		gate      featuregate.FeatureGate
		served    bool
		discovery error
		started   bool
		wantErr   string
	}{
		{name: "the client's CA, served", cfg: withCA, served: true, started: true},
		{name: "the client's CA file, served", cfg: withCAFile, served: true, started: true},
		{name: "--root-ca-file, no configuration", served: true, started: true,
			o: ctbpublisher.Options{RootCAFile: writeFile(t, caPEM(t))}},
		{name: "the gate off", cfg: withCA, served: true, gate: off},
		{name: "no CA", served: true},
		{name: "not served", cfg: withCA},
		{name: "discovery failing", cfg: withCA,
			discovery: apierrors.NewServiceUnavailable("later"), wantErr: "discovering"},
		{name: "the client's CA data not PEM", cfg: badCA, served: true,
			wantErr: "client configuration's CA data"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset()
			if tt.served {
				cs.Resources = servedResources()
			}
			if tt.discovery != nil {
				cs.PrependReactor("get", "resource", func(k8stesting.Action) (bool,
					runtime.Object, error) {
					return true, nil, tt.discovery
				})
			}
			d := ctbpublisher.Descriptor(tt.o)
			c, err := d.Init()(controllertest.LogContext(t), initContext(t, cs, tt.cfg, tt.gate))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Init = %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (c != nil) != tt.started {
				t.Fatalf("started %v, want %v", c != nil, tt.started)
			}
			if c != nil {
				controllertest.RunCancelled(t, c)
			}
		})
	}
}

// TestManagerPublishes: under a Manager the CA's bundle is created and the
// signer's outdated one deleted; another signer's is kept.
func TestManagerPublishes(t *testing.T) {
	ca := caPEM(t)
	outdated := &certv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes.io:kube-apiserver-serving:00"},
		Spec:       certv1.ClusterTrustBundleSpec{SignerName: ctbpublisher.SignerName}}
	other := &certv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:s:00"},
		Spec: certv1.ClusterTrustBundleSpec{SignerName: "example.com/s"}}
	h := managertest.New(t, "test", []descriptor.Descriptor{
		ctbpublisher.Descriptor(ctbpublisher.Options{RootCA: ca})}, outdated, other)
	h.Client.Resources = servedResources()
	h.Start()
	exists := func(name string) bool {
		_, err := h.Client.CertificatesV1().ClusterTrustBundles().Get(t.Context(), name,
			metav1.GetOptions{})
		return err == nil
	}
	name := ctbpublisher.BundleName(ca)
	managertest.Eventually(t, "the bundle published, the outdated one gone", func() bool {
		return exists(name) && !exists(outdated.Name)
	})
	got, err := h.Client.CertificatesV1().ClusterTrustBundles().Get(t.Context(), name,
		metav1.GetOptions{})
	if err != nil || got.Spec.TrustBundle != string(ca) || got.Spec.SignerName !=
		ctbpublisher.SignerName {
		t.Errorf("published %+v (%v)", got, err)
	}
	if !exists(other.Name) {
		t.Error("another signer's bundle was deleted")
	}
	// Deleted, it comes back.
	if err := h.Client.CertificatesV1().ClusterTrustBundles().Delete(t.Context(), name,
		metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	managertest.Eventually(t, "the bundle published again", func() bool { return exists(name) })
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
