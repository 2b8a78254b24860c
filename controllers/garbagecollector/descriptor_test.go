package garbagecollector_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlhost/ctrlhost/controllers/garbagecollector"
	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/informers"
	"github.com/ctrlhost/ctrlhost/managertest"
)

func TestDescriptorAndFlags(t *testing.T) {
	controllertest.CheckIdentity(
		t,
		garbagecollector.Descriptor(garbagecollector.NewOptions()),
		controllertest.Identity{
			Name: "garbage-collector-controller", Alias: "garbagecollector",
		},
	)
	o := garbagecollector.NewOptions()
	f := controllertest.ParseFlag(
		t,
		o.AddFlags,
		"concurrent-gc-syncs",
		"--concurrent-gc-syncs=7",
		"--enable-garbage-collector=false",
	)
	if f.DefValue != "20" ||
		f.Usage != "The number of garbage collector workers that are allowed to sync concurrently." {
		t.Errorf("--concurrent-gc-syncs default %q usage %q", f.DefValue, f.Usage)
	}
	e := controllertest.FlagSet(o.AddFlags).Lookup("enable-garbage-collector")
	if e == nil ||
		e.Usage != "Enables the generic garbage collector. MUST be synced with the corresponding flag of the kube-apiserver." {
		t.Errorf("--enable-garbage-collector: %+v", e)
	}
	if o.ConcurrentGCSyncs != 7 || o.EnableGarbageCollector {
		t.Errorf("parsed %d %v, want 7 false", o.ConcurrentGCSyncs, o.EnableGarbageCollector)
	}
	d := garbagecollector.NewOptions()
	if !d.EnableGarbageCollector || len(d.IgnoredResources) != 2 ||
		d.IgnoredResources[0] != (schema.GroupResource{Resource: "events"}) ||
		d.IgnoredResources[1] != (schema.GroupResource{Group: "events.k8s.io", Resource: "events"}) {
		t.Errorf("defaults %+v, want KCM's (enabled; events of both groups ignored)", d)
	}
}

func TestBuildValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       garbagecollector.Options
		wantErr []string
	}{
		{"defaults", garbagecollector.NewOptions(), nil},
		{"no workers", garbagecollector.Options{EnableGarbageCollector: true},
			[]string{
				`descriptor "garbage-collector-controller": --concurrent-gc-syncs: must be at least 1, got 0`,
			}},
		{
			"negative workers and an empty ignored resource",
			garbagecollector.Options{
				ConcurrentGCSyncs: -2,
				IgnoredResources:  []schema.GroupResource{{Group: "apps"}},
			},
			[]string{
				"--concurrent-gc-syncs: must be at least 1, got -2",
				`IgnoredResources[0]: resource must not be empty (group "apps")`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			controllertest.CheckBuild(t, garbagecollector.Descriptor(tt.o), tt.wantErr...)
		})
	}
}

// builder hands out the fake clients.
type builder struct {
	cs kubernetes.Interface
	md metadata.Interface
}

func (b builder) Config(
	string,
) (*rest.Config, error) {
	return nil, errors.New("no config")
}
func (b builder) Client(string) (kubernetes.Interface, error)       { return b.cs, nil }
func (b builder) MetadataClient(string) (metadata.Interface, error) { return b.md, nil }
func (b builder) DynamicClient(string) (dynamic.Interface, error) {
	return nil, errors.New("no dynamic client")
}

type mapper struct{ meta.RESTMapper }

func (mapper) Reset() {}

// hostContext is what a host passes the InitFunc, over fake clients.
func hostContext(t *testing.T) (descriptor.Context, *informers.Set) {
	h := managertest.New(t, "gc", nil)
	set := informers.New(h.Client, h.Metadata, informers.Options{})
	started := make(chan struct{})
	close(started)
	return descriptor.Context{
		Name:                            garbagecollector.Name,
		RootClientBuilder:               builder{h.Client, h.Metadata},
		ClientBuilder:                   builder{h.Client, h.Metadata},
		ObjectOrMetadataInformerFactory: set,
		InformersStarted:                started,
		RESTMapper: mapper{
			meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion}),
		},
		EventRecorder: &record.FakeRecorder{},
	}, set
}

// TestInit: disabled, the InitFunc declines (nil, nil); without the
// host's RESTMapper it fails naming it; otherwise it returns a Debuggable
// controller.
func TestInit(t *testing.T) {
	cc, _ := hostContext(t)
	off := garbagecollector.NewOptions()
	off.EnableGarbageCollector = false
	if c, err := garbagecollector.Descriptor(off).Init()(t.Context(), cc); c != nil || err != nil {
		t.Errorf("disabled: %v, %v; want nil, nil", c, err)
	}
	noMapper := cc
	noMapper.RESTMapper = nil
	if _, err := garbagecollector.Descriptor(garbagecollector.NewOptions()).Init()(t.Context(), noMapper); err == nil {
		t.Error("no RESTMapper: no error")
	}
	c, err := garbagecollector.Descriptor(garbagecollector.NewOptions()).Init()(t.Context(), cc)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(descriptor.Debuggable); !ok {
		t.Error("controller is not Debuggable")
	}
	controllertest.RunCancelled(t, c)
}

// TestRunWithCancelledContext: Run returns and releases its queues (their
// goroutines) even when the term ended before it started.
func TestRunWithCancelledContext(t *testing.T) {
	controllertest.CheckRunWithCancelledContext(
		t,
		garbagecollector.Descriptor(garbagecollector.NewOptions()),
	)
}

// TestHostRunsCollector: in a Manager (over fake clients whose discovery
// lists ConfigMaps) the collector deletes an object whose owner is absent,
// and the host serves its graph under the canonical name and the alias,
// as KCM 1.37 does.
func TestHostRunsCollector(t *testing.T) {
	owned := func(name string, owner *corev1.ConfigMap) *corev1.ConfigMap {
		c := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "ns",
				Name:      name,
				UID:       types.UID("uid-" + name),
			},
		}
		if owner != nil {
			c.OwnerReferences = []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID},
			}
		}
		return c
	}
	root := owned("root", nil)
	ghost := owned("ghost", nil)
	h := managertest.New(
		t,
		"test",
		[]descriptor.Descriptor{garbagecollector.Descriptor(garbagecollector.NewOptions())},
		root,
		owned("child", root),
		owned("dangling", ghost),
	)
	h.Client.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{
				Name:       "configmaps",
				Namespaced: true,
				Kind:       "ConfigMap",
				Verbs:      []string{"get", "list", "watch", "delete", "patch"},
			},
		}},
	}
	h.Start()
	controllertest.WaitFor(t, "the object with an absent owner to be deleted", func() bool {
		_, err := h.Client.CoreV1().
			ConfigMaps("ns").
			Get(t.Context(), "dangling", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	for _, path := range []string{"/debug/controllers/garbage-collector-controller/graph", "/debug/controllers/garbagecollector/graph"} {
		code, body := h.Get(path + "?uid=uid-root")
		if code != 200 || !strings.HasPrefix(body, "strict digraph full {") ||
			!strings.Contains(body, `"uid-child" -> "uid-root";`) {
			t.Errorf("%s: %d %q", path, code, body)
		}
	}
	if _, err := h.Client.CoreV1().ConfigMaps("ns").Get(t.Context(), "child", metav1.GetOptions{}); err != nil {
		t.Errorf("the dependent of an existing owner: %v", err)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
}
