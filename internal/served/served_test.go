package served_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/ctrlhost/ctrlhost/internal/served"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestView: a resource is missing until discovery lists it, served once it
// does; a failed request keeps the last answer, a 404 for its group
// version makes it missing; one request per group version.
func TestView(t *testing.T) {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	gadgets := widgets.GroupVersion().WithResource("gadgets")
	cs := fake.NewClientset()
	var fail error
	requests := 0
	cs.PrependReactor("get", "resource",
		func(clienttesting.Action) (bool, runtime.Object, error) {
			requests++
			return fail != nil, nil, fail
		})
	both := []schema.GroupVersionResource{widgets, gadgets}
	v := served.New(logr.Discard(), cs.Discovery(), nil, both)
	if got := v.Missing(both); len(got) != 2 {
		t.Fatalf("Missing before Refresh = %v, want both", got)
	}
	cs.Resources = []*metav1.APIResourceList{{GroupVersion: "example.com/v1",
		APIResources: []metav1.APIResource{{Name: "widgets"}, {Name: "widgets/status"}}}}
	v.Refresh(context.Background())
	if got := v.Missing(both); !slices.Equal(got, []string{gadgets.String()}) {
		t.Errorf("Missing = %v, want only gadgets", got)
	}
	if requests != 1 {
		t.Errorf("Refresh made %d discovery requests for one group version, want 1", requests)
	}
	cs.Resources = nil
	fail = errors.New("timeout")
	v.Refresh(context.Background())
	if got := v.Missing([]schema.GroupVersionResource{widgets}); len(got) != 0 {
		t.Errorf("a failed request changed the answer: missing %v", got)
	}
	fail = apierrors.NewNotFound(schema.GroupResource{}, "example.com/v1")
	v.Refresh(context.Background())
	if got := v.Missing([]schema.GroupVersionResource{widgets}); len(got) != 1 {
		t.Errorf("after a 404 for the group version, Missing = %v, want widgets", got)
	}
}

// TestResourcesOfWithoutDiscovery: a clientset without a discovery client
// (a bare &fake.Clientset{}, whose Discovery is a nil pointer) gets an
// error, not a panic in the host's goroutine.
func TestResourcesOfWithoutDiscovery(t *testing.T) {
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	if _, err := served.ResourcesOf(context.Background(), (&fake.Clientset{}).Discovery(),
		gv); err == nil {
		t.Error("no error from a nil discovery client")
	}
	if _, err := served.ResourcesOf(context.Background(), nil, gv); err == nil {
		t.Error("no error from no discovery client")
	}
}

var definitions = []schema.GroupVersionResource{
	{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"},
}

// definitionsClient is a metadata client whose lists of definitions
// succeed (empty) unless refused, and whose watches of them are the
// returned fake watchers, by resource.
func definitionsClient(refused string) (*metadatafake.FakeMetadataClient,
	map[string]*watch.FakeWatcher) {
	meta := metadatafake.NewSimpleMetadataClient(runtime.NewScheme())
	watchers := map[string]*watch.FakeWatcher{}
	for _, d := range definitions {
		w := watch.NewFake()
		watchers[d.Resource] = w
		meta.PrependReactor("list", d.Resource,
			func(clienttesting.Action) (bool, runtime.Object, error) {
				if d.Resource == refused {
					return true, nil, apierrors.NewForbidden(d.GroupResource(), "", nil)
				}
				return true, &metav1.List{}, nil
			})
		meta.PrependWatchReactor(d.Resource,
			func(clienttesting.Action) (bool, watch.Interface, error) { return true, w, nil })
	}
	return meta, watchers
}

// A Poller ticks every PollPeriod while its View does not watch every
// definition; while it does, every WatchedPollPeriod, except for
// SettlePeriod after a definition changed.
func TestPollerPeriod(t *testing.T) {
	widgets := []schema.GroupVersionResource{{Group: "example.com", Version: "v1",
		Resource: "widgets"}}
	t.Run("watching every definition", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			meta, watchers := definitionsClient("")
			v := served.New(logr.Discard(), fake.NewClientset().Discovery(), meta, widgets)
			var wg sync.WaitGroup
			kick := make(chan struct{}, 1)
			v.WatchDefinitions(ctx, &wg, kick)
			p := v.NewPoller()
			defer p.Stop()
			if got := p.Period(); got != served.WatchedPollPeriod {
				t.Errorf("period with every definition watched = %v, want %v", got,
					served.WatchedPollPeriod)
			}
			synctest.Wait()
			watchers["customresourcedefinitions"].Add(&metav1.PartialObjectMetadata{
				ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"}})
			<-kick
			p.Adjust()
			if got := p.Period(); got != served.PollPeriod {
				t.Errorf("period after a CRD changed = %v, want %v", got, served.PollPeriod)
			}
			ticks := 0
			for end := time.After(served.SettlePeriod + served.WatchedPollPeriod/2); ; {
				select {
				case <-p.C():
					ticks++
					p.Adjust()
					continue
				case <-end:
				}
				break
			}
			if want := int(served.SettlePeriod / served.PollPeriod); ticks != want {
				t.Errorf("%d ticks in the settle period and half a slow period after, want %d",
					ticks, want)
			}
			if got := p.Period(); got != served.WatchedPollPeriod {
				t.Errorf("period once settled = %v, want %v", got, served.WatchedPollPeriod)
			}
			cancel()
			wg.Wait()
		})
	})
	t.Run("an APIService list refused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			meta, _ := definitionsClient("apiservices")
			v := served.New(logr.Discard(), fake.NewClientset().Discovery(), meta, widgets)
			var wg sync.WaitGroup
			v.WatchDefinitions(ctx, &wg, make(chan struct{}, 1))
			p := v.NewPoller()
			defer p.Stop()
			time.Sleep(2 * served.WatchedPollPeriod) // the bubble's clock
			p.Adjust()
			if got := p.Period(); got != served.PollPeriod {
				t.Errorf("period without an APIService watch = %v, want %v", got,
					served.PollPeriod)
			}
			cancel()
			wg.Wait()
		})
	})
}
