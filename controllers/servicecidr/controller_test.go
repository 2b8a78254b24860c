package servicecidr

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/workloop"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

type cidrOpt func(*networkingv1.ServiceCIDR)

// deleted marks the ServiceCIDR deleted ago before now.
func deleted(ago time.Duration) cidrOpt {
	return func(sc *networkingv1.ServiceCIDR) {
		t := metav1.NewTime(now.Add(-ago))
		sc.DeletionTimestamp = &t
	}
}

func protected(sc *networkingv1.ServiceCIDR) { sc.Finalizers = []string{Finalizer} }

func ready(status metav1.ConditionStatus, reason, message string) cidrOpt {
	return func(sc *networkingv1.ServiceCIDR) {
		sc.Status.Conditions = []metav1.Condition{{Type: networkingv1.ServiceCIDRConditionReady,
			Status: status, Reason: reason, Message: message,
			LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
	}
}

func serviceCIDR(name string, cidrs []string, opts ...cidrOpt) *networkingv1.ServiceCIDR {
	sc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	for _, o := range opts {
		o(sc)
	}
	return sc
}

// address is an IPAddress as the API server's allocator makes it; manager
// "" leaves the managed-by label out.
func address(ip, manager string) *networkingv1.IPAddress {
	fam := "IPv4"
	if netip.MustParseAddr(ip).Is6() {
		fam = "IPv6"
	}
	l := map[string]string{networkingv1.LabelIPAddressFamily: fam}
	if manager != "" {
		l[networkingv1.LabelManagedBy] = manager
	}
	return &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: ip, Labels: l},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{
			Resource: "services", Namespace: "default", Name: "svc"}}}
}

func newTestController(t *testing.T, objs ...runtime.Object) (*controller, *fake.Clientset,
	*record.FakeRecorder) {
	t.Helper()
	client := fake.NewClientset(controllertest.DeepCopies(objs...)...)
	client.ClearActions()
	rec := record.NewFakeRecorder(10)
	return &controller{
		client: client,
		cidrs: networkinglisters.NewServiceCIDRLister(controllertest.ClusterIndexer(t,
			controllertest.OfType[*networkingv1.ServiceCIDR](objs)...)),
		ips: networkinglisters.NewIPAddressLister(controllertest.ClusterIndexer(t,
			controllertest.OfType[*networkingv1.IPAddress](objs)...)),
		recorder: rec,
		clock:    clocktesting.NewFakePassiveClock(now),
	}, client, rec
}

var (
	v4      = []string{"10.0.0.0/24"}
	v6      = []string{"fd00::/64"}
	isReady = ready(metav1.ConditionTrue, "", messageReady)
)

func TestSync(t *testing.T) {
	blocked := ready(metav1.ConditionFalse, networkingv1.ServiceCIDRReasonTerminating,
		messageTerminating)
	tests := []struct {
		name    string
		objs    []runtime.Object
		actions []string // verb/subresource of each write
		// what the ServiceCIDR "a" holds afterwards: finalizer, Ready
		// status ("" none, "gone": deleted from the fake)
		finalizer bool
		ready     metav1.ConditionStatus
		requeue   time.Duration
	}{
		{name: "new: finalizer and Ready",
			objs:    []runtime.Object{serviceCIDR("a", v4)},
			actions: []string{"patch/", "patch/status"}, finalizer: true, ready: "True"},
		{name: "kept: nothing",
			objs:      []runtime.Object{serviceCIDR("a", v4, protected, isReady)},
			finalizer: true, ready: "True"},
		{name: "another message: rewritten",
			objs: []runtime.Object{serviceCIDR("a", v4, protected,
				ready(metav1.ConditionTrue, "", "Kubernetes default Service CIDR is ready"))},
			actions: []string{"patch/status"}, finalizer: true, ready: "True"},
		{name: "deleted, an address only it holds: blocked",
			objs: []runtime.Object{serviceCIDR("a", v4, protected, isReady, deleted(time.Minute)),
				address("10.0.0.7", allocatorName)},
			actions: []string{"patch/status"}, finalizer: true, ready: "False"},
		{name: "deleted and blocked already: nothing",
			objs: []runtime.Object{serviceCIDR("a", v4, protected, blocked, deleted(time.Minute)),
				address("10.0.0.7", allocatorName)},
			finalizer: true, ready: "False"},
		{name: "deleted, an IPv6 address only it holds: blocked",
			objs: []runtime.Object{serviceCIDR("a", v6, protected, deleted(time.Minute)),
				address("fd00::ffff", allocatorName)},
			actions: []string{"patch/status"}, finalizer: true, ready: "False"},
		{name: "deleted, no address: released",
			objs: []runtime.Object{serviceCIDR("a", v4, protected, isReady, deleted(time.Minute)),
				address("10.9.0.7", allocatorName)},
			actions: []string{"patch/"}, ready: "True"},
		{name: "deleted, covered by another: released",
			objs: []runtime.Object{serviceCIDR("a", v4, protected, isReady, deleted(time.Minute)),
				serviceCIDR("parent", []string{"10.0.0.0/16"}),
				address("10.0.0.7", allocatorName)},
			actions: []string{"patch/"}, ready: "True"},
		{name: "deleted, covered by the same range: released",
			objs: []runtime.Object{serviceCIDR("a", v4, protected, isReady, deleted(time.Minute)),
				serviceCIDR("twin", v4), address("10.0.0.7", allocatorName)},
			actions: []string{"patch/"}, ready: "True"},
		{name: "deleted, an overlapping smaller one holds the address too: released",
			objs: []runtime.Object{serviceCIDR("a", v4, protected, isReady, deleted(time.Minute)),
				serviceCIDR("half", []string{"10.0.0.0/25"}),
				address("10.0.0.7", allocatorName)},
			actions: []string{"patch/"}, ready: "True"},
		{name: "deleted, dual-stack, one range covered: the other blocks",
			objs: []runtime.Object{
				serviceCIDR("a", append(slices.Clone(v4), v6...), protected, isReady,
					deleted(time.Minute)),
				serviceCIDR("parent", []string{"10.0.0.0/16"}),
				address("fd00::1", allocatorName)},
			actions: []string{"patch/status"}, finalizer: true, ready: "False"},
		{name: "deleted, an address no allocator made: released",
			objs: []runtime.Object{serviceCIDR("a", v4, protected, isReady, deleted(time.Minute)),
				address("10.0.0.7", ""), address("10.0.0.8", "someone-else")},
			actions: []string{"patch/"}, ready: "True"},
		{name: "deleted, only its network and broadcast addresses: released",
			objs: []runtime.Object{serviceCIDR("a", v4, protected, isReady, deleted(time.Minute)),
				address("10.0.0.0", allocatorName), address("10.0.0.255", allocatorName)},
			actions: []string{"patch/"}, ready: "True"},
		{name: "deleted 4s ago, free: waits out the grace",
			objs: []runtime.Object{
				serviceCIDR("a", v4, protected, isReady, deleted(4*time.Second))},
			finalizer: true, ready: "True", requeue: 6 * time.Second},
		{name: "deleted without the finalizer: nothing",
			objs:  []runtime.Object{serviceCIDR("a", v4, isReady, deleted(time.Minute))},
			ready: "True"},
		{name: "deleted, blocked, no finalizer: blocked",
			objs: []runtime.Object{serviceCIDR("a", v4, deleted(time.Minute)),
				address("10.0.0.7", allocatorName)},
			actions: []string{"patch/status"}, ready: "False"},
		{name: "gone: nothing", objs: nil, ready: "gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client, _ := newTestController(t, tt.objs...)
			err := c.sync(controllertest.LogContext(t), "a")
			switch {
			case tt.requeue > 0 && err != workloop.RequeueAfter(tt.requeue):
				t.Errorf("sync = %v, want a requeue after %v", err, tt.requeue)
			case tt.requeue == 0 && err != nil:
				t.Fatal(err)
			}
			var got []string
			for _, a := range client.Actions() {
				if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
					continue
				}
				got = append(got, a.GetVerb()+"/"+a.GetSubresource())
			}
			if !slices.Equal(got, tt.actions) {
				t.Errorf("wrote %q, want %q", got, tt.actions)
			}
			sc, err := client.NetworkingV1().ServiceCIDRs().Get(t.Context(), "a",
				metav1.GetOptions{})
			if tt.ready == "gone" {
				if err == nil {
					t.Error("a ServiceCIDR appeared")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if has := slices.Contains(sc.Finalizers, Finalizer); has != tt.finalizer {
				t.Errorf("finalizers %q, want the finalizer: %v", sc.Finalizers, tt.finalizer)
			}
			cond := apimeta.FindStatusCondition(sc.Status.Conditions,
				networkingv1.ServiceCIDRConditionReady)
			if cond == nil || cond.Status != tt.ready {
				t.Fatalf("Ready condition %+v, want status %s", cond, tt.ready)
			}
			want := messageReady
			if cond.Status == metav1.ConditionFalse {
				want = messageTerminating
				if cond.Reason != networkingv1.ServiceCIDRReasonTerminating {
					t.Errorf("reason %q, want Terminating", cond.Reason)
				}
			}
			if cond.Message != want {
				t.Errorf("message %q, want %q", cond.Message, want)
			}
			if slices.Contains(tt.actions, "patch/status") && !cond.LastTransitionTime.Equal(
				&metav1.Time{Time: now}) {
				t.Errorf("transition time %v, want now", cond.LastTransitionTime)
			}
		})
	}
}

// TestSyncErrors: a failed write is returned; a failed Ready write also
// records KCM's warning event; a ServiceCIDR gone under a patch is no
// error.
func TestSyncErrors(t *testing.T) {
	failing := func(client *fake.Clientset, subresource string, err error) {
		client.PrependReactor("patch", "servicecidrs",
			func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != subresource {
					return false, nil, nil
				}
				return true, nil, err
			})
	}
	boom := errors.New("boom")
	c, client, rec := newTestController(t, serviceCIDR("a", v4, protected))
	failing(client, "status", boom)
	if err := c.sync(t.Context(), "a"); !errors.Is(err, boom) {
		t.Errorf("sync = %v, want the status write's error", err)
	}
	if ev := controllertest.Events(rec); !slices.Equal(ev, []string{
		"Warning KubernetesServiceCIDRError The ServiceCIDR Status can not be set to Ready=True"}) {
		t.Errorf("events %q", ev)
	}

	c, client, rec = newTestController(t, serviceCIDR("a", v4))
	failing(client, "", boom)
	if err := c.sync(t.Context(), "a"); !errors.Is(err, boom) {
		t.Errorf("sync = %v, want the finalizer patch's error", err)
	}
	if controllertest.CountActions(client, "patch", "servicecidrs") != 1 {
		t.Error("the Ready condition was written after the finalizer patch failed")
	}
	if ev := controllertest.Events(rec); len(ev) != 0 {
		t.Errorf("events %q, want none", ev)
	}

	c, client, _ = newTestController(t, serviceCIDR("a", v4, protected, deleted(time.Minute)))
	failing(client, "", apierrors.NewNotFound(
		networkingv1.Resource("servicecidrs"), "a"))
	if err := c.sync(t.Context(), "a"); err != nil {
		t.Errorf("sync of a ServiceCIDR gone under the patch = %v, want nil", err)
	}
}

func TestCIDRAddedQueuesOverlapping(t *testing.T) {
	c, _, _ := newTestController(t,
		serviceCIDR("big", []string{"10.0.0.0/8"}),
		serviceCIDR("inside", []string{"10.1.0.0/24"}),
		serviceCIDR("apart", []string{"192.168.0.0/24"}),
		serviceCIDR("v6", v6))
	got := c.cidrAdded(serviceCIDR("new", []string{"10.1.0.0/16", "fd00::/48"}))
	slices.Sort(got)
	if want := []string{"big", "inside", "new", "v6"}; !slices.Equal(got, want) {
		t.Errorf("cidrAdded = %q, want %q", got, want)
	}
	if got := c.cidrAdded(address("10.0.0.1", allocatorName)); got != nil {
		t.Errorf("cidrAdded of an IPAddress = %q", got)
	}
}

func TestHoldersOf(t *testing.T) {
	c, _, _ := newTestController(t,
		serviceCIDR("a", v4), serviceCIDR("b", []string{"10.0.0.0/25"}), serviceCIDR("v6", v6))
	for _, tt := range []struct {
		obj  any
		want []string
	}{
		{address("10.0.0.7", allocatorName), []string{"a", "b"}},
		{address("10.0.0.200", allocatorName), []string{"a"}},
		{address("10.0.0.128", allocatorName), []string{"a"}}, // b's broadcast is 10.0.0.127
		{address("10.0.0.0", allocatorName), nil},
		{address("10.0.0.7", ""), nil},
		{address("fd00::", allocatorName), nil},
		{address("fd00::ffff:ffff:ffff:ffff", allocatorName), []string{"v6"}},
		{cache.DeletedFinalStateUnknown{Key: "10.0.0.7",
			Obj: address("10.0.0.7", allocatorName)}, []string{"a", "b"}},
		{serviceCIDR("x", v4), nil},
	} {
		got := c.holdersOf(tt.obj)
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("holdersOf(%v) = %q, want %q", tt.obj, got, tt.want)
		}
	}
}

func TestAllocatable(t *testing.T) {
	for _, tt := range []struct {
		prefix, addr string
		want         bool
	}{
		{"10.0.0.0/24", "10.0.0.1", true},
		{"10.0.0.0/24", "10.0.0.254", true},
		{"10.0.0.0/24", "10.0.0.0", false},
		{"10.0.0.0/24", "10.0.0.255", false},
		{"10.0.0.0/24", "10.0.1.1", false},
		{"10.0.0.0/23", "10.0.0.255", true},
		{"10.0.0.0/23", "10.0.1.255", false},
		{"10.0.0.0/30", "10.0.0.3", false},
		{"fd00::/64", "fd00::", false},
		{"fd00::/64", "fd00::ffff:ffff:ffff:ffff", true},
		{"fd00::/64", "10.0.0.1", false},
	} {
		got := allocatable(netip.MustParsePrefix(tt.prefix), netip.MustParseAddr(tt.addr))
		if got != tt.want {
			t.Errorf("allocatable(%s, %s) = %v, want %v", tt.prefix, tt.addr, got, tt.want)
		}
	}
	if f := family("nonsense"); f != "" {
		t.Errorf("family of a bad range = %q", f)
	}
}
