package serviceaccounttoken

import (
	"bytes"
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

// TestInitChoosesCAAndClient: the CA written to secrets is --root-ca-file's,
// else the root client configuration's CA data, else none (a host without a
// configuration); the controller writes with the root client (the host's
// credentials), or, on a host without one, the controller's client.
func TestInitChoosesCAAndClient(t *testing.T) {
	keyFile, _ := WriteTestKey(t, "p256")
	caFile, fileCA := WriteTestCA(t)
	configCA := []byte("config CA data")
	rootCS, ownCS := fake.NewClientset(), fake.NewClientset()
	tests := []struct {
		name       string
		rootCAFile string
		root       descriptor.ClientBuilder
		wantCA     []byte
		wantClient *fake.Clientset
	}{
		{
			"--root-ca-file wins",
			caFile,
			controllertest.ClientBuilder(
				rootCS,
				&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: configCA}},
			),
			fileCA,
			rootCS,
		},
		{
			"else the root configuration's CA data",
			"",
			controllertest.ClientBuilder(
				rootCS,
				&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: configCA}},
			),
			configCA,
			rootCS,
		},
		{"no configuration: no CA", "", controllertest.ClientBuilder(rootCS, nil), nil, rootCS},
		{"no root client builder: the controller's client", "", nil, nil, ownCS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			o.ServiceAccountKeyFile, o.RootCAFile = keyFile, tt.rootCAFile
			factory := informers.NewSharedInformerFactory(ownCS, 0)
			got, err := Descriptor(o).Init()(t.Context(), descriptor.Context{
				Name: Name, ClientBuilder: controllertest.ClientBuilder(ownCS, nil), RootClientBuilder: tt.root,
				InformerFactory: factory, EventRecorder: &record.FakeRecorder{},
			})
			if err != nil {
				t.Fatal(err)
			}
			c := got.(*controller)
			defer controllertest.RunCancelled(t, c)
			if !bytes.Equal(c.rootCA, tt.wantCA) {
				t.Errorf("root CA %q, want %q", c.rootCA, tt.wantCA)
			}
			if c.client != tt.wantClient {
				t.Error("the controller writes with the wrong client")
			}
			if c.workers != defaultConcurrentSATokenSyncs {
				t.Errorf("workers %d, want %d", c.workers, defaultConcurrentSATokenSyncs)
			}
		})
	}
}
