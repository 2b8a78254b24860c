package rootcacertpublisher_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
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
	controllertest.CheckIdentity(
		t,
		rootcacertpublisher.Descriptor(rootcacertpublisher.NewOptions()),
		controllertest.Identity{
			Name: "root-ca-certificate-publisher-controller", Alias: "root-ca-cert-publisher",
		},
	)
	o := rootcacertpublisher.NewOptions()
	f := controllertest.ParseFlag(t, o.AddFlags, "root-ca-file", "--root-ca-file=/etc/ca.pem")
	if f.DefValue != "" ||
		!strings.Contains(f.Usage, "This must be a valid PEM-encoded CA bundle.") {
		t.Fatalf("--root-ca-file: %+v", f)
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
		{
			"negative workers",
			rootcacertpublisher.Options{Workers: -2},
			[]string{
				"root-ca-certificate-publisher-controller",
				"Workers: must be at least 1, got -2",
			},
		},
		{
			"both",
			rootcacertpublisher.Options{RootCA: good, RootCAFile: "/x"},
			[]string{"RootCA and --root-ca-file are both set"},
		},
		{
			"bad bundle",
			rootcacertpublisher.Options{RootCA: []byte("nope")},
			[]string{"RootCA: not a PEM-encoded CA bundle"},
		},
		{
			"missing file",
			rootcacertpublisher.Options{RootCAFile: filepath.Join(t.TempDir(), "missing")},
			[]string{"--root-ca-file: open"},
		},
		{
			"bad file",
			rootcacertpublisher.Options{RootCAFile: writeFile(t, []byte("nope"))},
			[]string{"--root-ca-file", "not a PEM-encoded CA bundle"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, rootcacertpublisher.Descriptor(tt.o), tt.wantErr...)
		})
	}
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
		{
			"file vanished since Build",
			rootcacertpublisher.Options{RootCAFile: filepath.Join(t.TempDir(), "gone")},
			nil,
			false,
			"--root-ca-file",
		},
		{
			"client CA data",
			rootcacertpublisher.Options{},
			&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: ca}},
			true,
			"",
		},
		{
			"client CA file",
			rootcacertpublisher.Options{},
			&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: writeFile(t, ca)}},
			true,
			"",
		},
		{"client without CA", rootcacertpublisher.Options{}, &rest.Config{}, false, ""},
		{"no client config", rootcacertpublisher.Options{}, nil, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			c, err := controllertest.Init(t, rootcacertpublisher.Descriptor(tt.o), tt.cfg)
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
				controllertest.RunCancelled(t, c)
			}
		})
	}
}

func TestManagerPublishes(t *testing.T) {
	ca := caPEM(t)
	o := rootcacertpublisher.NewOptions()
	o.RootCA = ca
	h := managertest.New(
		t,
		"test",
		[]descriptor.Descriptor{rootcacertpublisher.Descriptor(o)},
		&corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: "ns"},
			Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
		},
	).Start()
	cms := h.Client.CoreV1().ConfigMaps("ns")
	published := func() bool {
		cm, err := cms.Get(t.Context(), rootcacertpublisher.ConfigMapName, metav1.GetOptions{})
		return err == nil && cm.Data[rootcacertpublisher.DataKey] == string(ca) &&
			len(cm.Data) == 1 &&
			cm.Annotations[rootcacertpublisher.DescriptionAnnotation] == rootcacertpublisher.Description
	}
	controllertest.WaitFor(t, "the config map", published)

	if err := cms.Delete(t.Context(), rootcacertpublisher.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "the config map to be recreated", published)

	cm, err := cms.Get(t.Context(), rootcacertpublisher.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{rootcacertpublisher.DataKey: "tampered"}
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "the config map to be fixed", published)
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}

func TestManagerWithoutCADoesNotStart(t *testing.T) {
	h := managertest.New(t, "test", []descriptor.Descriptor{rootcacertpublisher.Descriptor(rootcacertpublisher.NewOptions())}).
		Start()
	h.WaitFor(rootcacertpublisher.Name, manager.PhaseNotStarted)
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
