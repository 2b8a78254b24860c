package rootcacertpublisher_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"github.com/ctrlhost/ctrlhost/controllers/rootcacertpublisher"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
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

func TestDescriptorAndFlags(t *testing.T) {
	d := rootcacertpublisher.Descriptor(rootcacertpublisher.NewOptions())
	if d.Name() != "root-ca-certificate-publisher-controller" {
		t.Errorf("name %q", d.Name())
	}
	if a := d.Aliases(); len(a) != 1 || a[0] != "root-ca-cert-publisher" {
		t.Errorf("aliases %q, want [root-ca-cert-publisher]", a)
	}
	if d.IsDisabledByDefault() {
		t.Error("disabled by default; KCM enables it")
	}
	o := rootcacertpublisher.NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	f := fs.Lookup("root-ca-file")
	if f == nil || f.DefValue != "" || !strings.Contains(f.Usage, "This must be a valid PEM-encoded CA bundle.") {
		t.Fatalf("--root-ca-file: %+v", f)
	}
	if err := fs.Parse([]string{"--root-ca-file=/etc/ca.pem"}); err != nil {
		t.Fatal(err)
	}
	if o.RootCAFile != "/etc/ca.pem" {
		t.Errorf("RootCAFile %q", o.RootCAFile)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	good := caPEM(t)
	tests := []struct {
		name    string
		o       rootcacertpublisher.Options
		wantErr []string
	}{
		{"defaults", rootcacertpublisher.NewOptions(), nil},
		{"zero value", rootcacertpublisher.Options{}, nil},
		{"bundle", rootcacertpublisher.Options{RootCA: good}, nil},
		{"file", rootcacertpublisher.Options{RootCAFile: writeFile(t, good)}, nil},
		{"negative workers", rootcacertpublisher.Options{Workers: -2}, []string{"root-ca-certificate-publisher-controller", "Workers: must be at least 1, got -2"}},
		{"both", rootcacertpublisher.Options{RootCA: good, RootCAFile: "/x"}, []string{"RootCA and --root-ca-file are both set"}},
		{"bad bundle", rootcacertpublisher.Options{RootCA: []byte("nope")}, []string{"RootCA: not a PEM-encoded CA bundle"}},
		{"missing file", rootcacertpublisher.Options{RootCAFile: filepath.Join(t.TempDir(), "missing")}, []string{"--root-ca-file: open"}},
		{"bad file", rootcacertpublisher.Options{RootCAFile: writeFile(t, []byte("nope"))}, []string{"--root-ca-file", "not a PEM-encoded CA bundle"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manager.NewBuilder("m").WithClient(fake.NewClientset(), nil).Register(rootcacertpublisher.Descriptor(tt.o)).Build()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Build succeeded")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// clients is a ClientBuilder over a fake clientset with an optional config.
type clients struct {
	cs  kubernetes.Interface
	cfg *rest.Config
}

func (c clients) Config(string) (*rest.Config, error) {
	if c.cfg == nil {
		return nil, errors.New("no config")
	}
	return rest.CopyConfig(c.cfg), nil
}
func (c clients) Client(string) (kubernetes.Interface, error) { return c.cs, nil }
func (c clients) MetadataClient(string) (metadata.Interface, error) {
	return nil, errors.New("no metadata client")
}

// TestCASource: which bundle the InitFunc picks, and that it does not start
// without one.
func TestCASource(t *testing.T) {
	ca := caPEM(t)
	tests := []struct {
		name      string
		o         rootcacertpublisher.Options
		cfg       *rest.Config
		wantStart bool
		wantErr   string
	}{
		{"bundle", rootcacertpublisher.Options{RootCA: ca}, nil, true, ""},
		{"file", rootcacertpublisher.Options{RootCAFile: writeFile(t, ca)}, nil, true, ""},
		{"file vanished since Build", rootcacertpublisher.Options{RootCAFile: filepath.Join(t.TempDir(), "gone")}, nil, false, "--root-ca-file"},
		{"client CA data", rootcacertpublisher.Options{}, &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, true, ""},
		{"client CA file", rootcacertpublisher.Options{}, &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: writeFile(t, ca)}}, true, ""},
		{"client without CA", rootcacertpublisher.Options{}, &rest.Config{}, false, ""},
		{"no client config", rootcacertpublisher.Options{}, nil, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			cs := fake.NewClientset()
			c, err := rootcacertpublisher.Descriptor(tt.o).Init()(t.Context(), descriptor.Context{
				Name: rootcacertpublisher.Name, ClientBuilder: clients{cs, tt.cfg},
				InformerFactory: informers.NewSharedInformerFactory(cs, 0),
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Init error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (c != nil) != tt.wantStart {
				t.Fatalf("Init returned controller %v, want one: %v", c, tt.wantStart)
			}
			if c != nil {
				// Release the queue: Run with a cancelled context.
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				if err := c.Run(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// waitFor polls cond every 10ms for up to 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestManagerPublishes(t *testing.T) {
	ca := caPEM(t)
	o := rootcacertpublisher.NewOptions()
	o.RootCA = ca
	h := managertest.New(t, "test", []descriptor.Descriptor{rootcacertpublisher.Descriptor(o)},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
	).Start()
	cms := h.Client.CoreV1().ConfigMaps("ns")
	published := func() bool {
		cm, err := cms.Get(t.Context(), rootcacertpublisher.ConfigMapName, metav1.GetOptions{})
		return err == nil && cm.Data[rootcacertpublisher.DataKey] == string(ca) && len(cm.Data) == 1 &&
			cm.Annotations[rootcacertpublisher.DescriptionAnnotation] == rootcacertpublisher.Description
	}
	waitFor(t, "the config map", published)

	if err := cms.Delete(t.Context(), rootcacertpublisher.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the config map to be recreated", published)

	cm, err := cms.Get(t.Context(), rootcacertpublisher.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{rootcacertpublisher.DataKey: "tampered"}
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the config map to be fixed", published)
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestManagerWithoutCADoesNotStart(t *testing.T) {
	h := managertest.New(t, "test", []descriptor.Descriptor{rootcacertpublisher.Descriptor(rootcacertpublisher.NewOptions())}).Start()
	h.WaitFor(rootcacertpublisher.Name, manager.PhaseNotStarted)
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
