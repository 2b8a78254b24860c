package kcm

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	kinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/ctrlhost/ctrlhost/descriptor"
	"github.com/ctrlhost/ctrlhost/manager"
)

// fakeBuilder hands out the fakes; it has no REST config, as a Manager
// built over ready-made clients.
type fakeBuilder struct {
	cs   kubernetes.Interface
	meta metadata.Interface
}

func (f fakeBuilder) Config(string) (*rest.Config, error)               { return nil, errNoConfig }
func (f fakeBuilder) Client(string) (kubernetes.Interface, error)       { return f.cs, nil }
func (f fakeBuilder) MetadataClient(string) (metadata.Interface, error) { return f.meta, nil }
func (f fakeBuilder) DynamicClient(string) (dynamic.Interface, error)   { return nil, errNoConfig }

var errNoConfig = context.DeadlineExceeded

// newTerm is what a Manager's term hands the InitFuncs: fresh factories and
// a fresh InformersStarted.
func newTerm(cs kubernetes.Interface, meta metadata.Interface) (descriptor.Context, chan struct{}) {
	started := make(chan struct{})
	b := fakeBuilder{cs, meta}
	return descriptor.Context{
		Name:                    "ttl-after-finished-controller",
		ClientBuilder:           b,
		RootClientBuilder:       b,
		InformerFactory:         kinformers.NewSharedInformerFactory(cs, 0),
		MetadataInformerFactory: metadatainformer.NewSharedInformerFactory(meta, 0),
		InformersStarted:        started,
		ResyncPeriod:            func() time.Duration { return time.Hour },
		RESTMapper:              restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery())),
	}, started
}

// TestEachTermGetsItsOwnContext: the controllers of one term share one
// upstream ControllerContext; the next term gets a new one; a term's is
// forgotten when its context ends; and InformersStarted relays the term's.
func TestEachTermGetsItsOwnContext(t *testing.T) {
	o, err := NewOptions()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Config(manager.NewOptions())
	if err != nil {
		t.Fatal(err)
	}
	h := &host{cfg: Config{Component: cfg}, terms: map[<-chan struct{}]*termContext{}}
	cs := fake.NewClientset()
	meta := metadatafake.NewSimpleMetadataClient(runtime.NewScheme())

	ctx1, end1 := context.WithCancel(t.Context())
	cc1, started1 := newTerm(cs, meta)
	a, err := h.term(ctx1, cc1).get(ctx1, cc1, h.cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.term(ctx1, cc1).get(ctx1, cc1, h.cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if a.InformersStarted != b.InformersStarted || a.ControllerManagerMetrics != b.ControllerManagerMetrics {
		t.Error("two controllers of one term got different ControllerContexts")
	}
	if a.GraphBuilder != nil {
		t.Error("a graph builder for a controller that does not use it")
	}
	close(started1)
	select {
	case <-a.InformersStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("upstream's InformersStarted did not close after the term's")
	}

	ctx2, end2 := context.WithCancel(t.Context())
	defer end2()
	cc2, _ := newTerm(cs, meta)
	c, err := h.term(ctx2, cc2).get(ctx2, cc2, h.cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.InformersStarted == a.InformersStarted || c.InformerFactory == a.InformerFactory {
		t.Error("the second term shares its ControllerContext with the first")
	}

	end1()
	deadline := time.After(10 * time.Second)
	for {
		h.mu.Lock()
		n := len(h.terms)
		h.mu.Unlock()
		if n == 1 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("%d terms remembered after the first ended, want 1", n)
		case <-time.After(10 * time.Millisecond):
		}
	}
	end2()
	select {
	case <-c.InformersStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("upstream's InformersStarted did not close when the term ended before its informers started")
	}
}
