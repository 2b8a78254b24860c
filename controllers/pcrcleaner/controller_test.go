package pcrcleaner

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
)

var now = controllertest.Epoch

func request(ns, name string, age time.Duration) *certv1.PodCertificateRequest {
	return &certv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(now.Add(-age))}}
}

func TestExpired(t *testing.T) {
	for _, tt := range []struct {
		age  time.Duration
		want bool
	}{
		{0, false},
		{MaxAge - time.Second, false},
		{MaxAge, true},
		{MaxAge + time.Second, true},
		{24 * time.Hour, true},
	} {
		if got := expired(request("ns", "r", tt.age), now); got != tt.want {
			t.Errorf("expired at age %v = %v, want %v", tt.age, got, tt.want)
		}
	}
}

// fixture is a cleaner over a fake clientset holding objs, with a lister
// over an indexer holding them too.
func fixture(t *testing.T, objs ...*certv1.PodCertificateRequest) (*controller, *fake.Clientset,
	cache.Indexer, *testingclock.FakeClock) {
	t.Helper()
	var seed []runtime.Object
	for _, o := range objs {
		seed = append(seed, o.DeepCopy())
	}
	client := fake.NewClientset(seed...)
	client.ClearActions()
	idx := controllertest.NamespacedIndexer(t, objs...)
	clk := testingclock.NewFakeClock(now)
	return &controller{client: client, requests: certlisters.NewPodCertificateRequestLister(idx),
		synced: func() bool { return true }, clock: clk}, client, idx, clk
}

// deleted lists the deletions the client received, with their UID
// preconditions.
func deleted(t *testing.T, client *fake.Clientset) []string {
	t.Helper()
	var out []string
	for _, a := range client.Actions() {
		d, ok := a.(k8stesting.DeleteActionImpl)
		if !ok {
			t.Errorf("unexpected %s", a.GetVerb())
			continue
		}
		p := d.DeleteOptions.Preconditions
		if p == nil || p.UID == nil || *p.UID != types.UID("uid-"+d.Name) {
			t.Errorf("deleted %s without its UID as a precondition: %+v", d.Name, p)
		}
		out = append(out, d.Namespace+"/"+d.Name)
	}
	slices.Sort(out)
	return out
}

func TestPass(t *testing.T) {
	c, client, _, _ := fixture(t,
		request("a", "fresh", time.Minute),
		request("a", "old", MaxAge),
		request("b", "older", time.Hour),
		request("b", "stuck", time.Hour),
		request("c", "gone", time.Hour))
	client.PrependReactor("delete", "podcertificaterequests",
		func(a k8stesting.Action) (bool, runtime.Object, error) {
			switch a.(k8stesting.DeleteAction).GetName() {
			case "stuck":
				return true, nil, apierrors.NewInternalError(errors.New("etcd is away"))
			case "gone":
				return true, nil, apierrors.NewNotFound(requests.GroupResource(), "gone")
			}
			return false, nil, nil
		})
	c.pass(controllertest.LogContext(t))
	want := []string{"a/old", "b/older", "b/stuck", "c/gone"}
	if got := deleted(t, client); !slices.Equal(got, want) {
		t.Errorf("deleted %q, want %q (a failure stops no other)", got, want)
	}
}

// TestRunPassesEveryPeriod: a pass at once, the next Period after it.
func TestRunPassesEveryPeriod(t *testing.T) {
	c, client, idx, clk := fixture(t, request("a", "old", time.Hour),
		request("a", "young", MaxAge-time.Minute))
	ctx, cancel := context.WithCancel(controllertest.LogContext(t))
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	controllertest.WaitFor(t, "the first pass", func() bool {
		return len(client.Actions()) == 1 && clk.HasWaiters()
	})
	if got := deleted(t, client); !slices.Equal(got, []string{"a/old"}) {
		t.Errorf("first pass deleted %q, want [a/old]", got)
	}
	// The cache still holds the young one (no informer here); it is old
	// enough by the next pass, not one minute before.
	if err := idx.Delete(request("a", "old", 0)); err != nil {
		t.Fatal(err)
	}
	clk.Step(Period - time.Second)
	if n := len(client.Actions()); n != 1 {
		t.Errorf("%d deletions before the period was over", n)
	}
	clk.Step(time.Second)
	controllertest.WaitFor(t, "the second pass", func() bool {
		return len(client.Actions()) == 2 && clk.HasWaiters()
	})
	if got := deleted(t, client); !slices.Equal(got, []string{"a/old", "a/young"}) {
		t.Errorf("deleted %q, want [a/old a/young]", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
