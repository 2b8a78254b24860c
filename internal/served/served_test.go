package served_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
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
