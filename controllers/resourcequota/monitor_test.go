package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/ctrlhost/ctrlhost/controllers/internal/controllertest"
	"github.com/ctrlhost/ctrlhost/descriptor"
)

var (
	gvrPods        = corev1.SchemeGroupVersion.WithResource("pods")
	gvrSecrets     = corev1.SchemeGroupVersion.WithResource("secrets")
	gvrQuotas      = corev1.SchemeGroupVersion.WithResource("resourcequotas")
	gvrEvents      = corev1.SchemeGroupVersion.WithResource("events")
	gvrDeployments = appsv1.SchemeGroupVersion.WithResource("deployments")
	gvrWidgets     = schema.GroupVersionResource{
		Group:    "example.com",
		Version:  "v1",
		Resource: "widgets",
	}
)

func set(gvrs ...schema.GroupVersionResource) map[schema.GroupVersionResource]struct{} {
	out := map[schema.GroupVersionResource]struct{}{}
	for _, g := range gvrs {
		out[g] = struct{}{}
	}
	return out
}

// replenished records the replenishment calls.
type replenished struct {
	mu    sync.Mutex
	calls []string
}

func (r *replenished) add(gr schema.GroupResource, ns string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, gr.String()+" "+ns)
}

func (r *replenished) has(call string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.calls {
		if c == call {
			return true
		}
	}
	return false
}

// TestMonitorsFollowDiscovery: monitors are added for discovered
// resources (not the ignored ones), each new resource gets an object-count
// evaluator, a resource without an informer is an error that does not stop
// the others, a delete seen by a running informer replenishes, and a
// resource no longer discovered is no longer monitored.
func TestMonitorsFollowDiscovery(t *testing.T) {
	client := fake.NewClientset(
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"}},
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(t.Context())
	defer func() { cancel(); factory.Shutdown() }()
	var rep replenished
	m := &monitors{factory: typedOnly{factory}, registry: newRegistry(), replenish: rep.add}

	err := m.sync(ctx, set(gvrPods, gvrDeployments, gvrEvents, gvrWidgets))
	if err == nil || !strings.Contains(err.Error(), "widgets") {
		t.Errorf("sync error %v, want one naming widgets", err)
	}
	if got := m.resources(); len(got) != 2 {
		t.Errorf("monitored %v, want pods and deployments", got)
	}
	e := m.registry.get(gvrDeployments.GroupResource())
	if e == nil || len(e.matching([]corev1.ResourceName{"count/deployments.apps"})) != 1 {
		t.Fatal("no object-count evaluator for deployments.apps")
	}
	if m.synced() {
		t.Error("synced before the informers started")
	}
	m.start(ctx.Done())
	controllertest.WaitFor(t, "the monitors to sync", m.synced)
	if err := client.AppsV1().Deployments("ns").Delete(ctx, "d", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(
		t,
		"the delete to replenish",
		func() bool { return rep.has("deployments.apps ns") },
	)

	if err := m.sync(ctx, set(gvrPods)); err != nil {
		t.Fatal(err)
	}
	if got := m.resources(); len(got) != 1 {
		t.Errorf("monitored %v after deployments went, want pods only", got)
	}
	if (&monitors{}).synced() {
		t.Error("no monitors reported synced")
	}
}

// TestControllerKeepsStatus runs the controller over a fake clientset
// (with the API server's write conflicts on quotas): a
// quota created is measured (through the priority queue), and deleting a
// secret brings its usage down (replenishment).
func TestControllerKeepsStatus(t *testing.T) {
	client := fake.NewClientset(secret("ns", "a"), secret("ns", "b"), secret("other", "c"))
	withResourceVersions(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	started := make(chan struct{})
	close(started)
	ctx, cancel := context.WithCancel(controllertest.LogContext(t))
	defer factory.Shutdown()
	c, err := newController(ctx, descriptor.Context{
		Name: Name, ClientBuilder: controllertest.ClientBuilder(client, nil), InformerFactory: factory,
		InformersStarted: started, EventRecorder: &record.FakeRecorder{},
	}, NewOptions().withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	// Fake discovery lists nothing: stand in for it.
	c.discover = func() (map[schema.GroupVersionResource]struct{}, error) {
		return set(gvrPods, gvrSecrets, gvrQuotas), nil
	}
	resources, _ := c.discover()
	if err := c.monitors.sync(ctx, resources); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	if _, err := client.CoreV1().ResourceQuotas("ns").Create(ctx, quota("q", rl("secrets", "10", "pods", "5"), nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	used := func(name corev1.ResourceName, want string) func() bool {
		return func() bool {
			q, err := client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
			if err != nil {
				return false
			}
			v, ok := q.Status.Used[name]
			return ok && v.String() == want
		}
	}
	controllertest.WaitFor(t, "the quota to count 2 secrets", used("secrets", "2"))
	if err := client.CoreV1().Secrets("ns").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitFor(t, "the deletion to be replenished", used("secrets", "1"))
}

// withResourceVersions gives client's resource quotas the optimistic
// concurrency of the API server, which the controller relies on when both
// queues sync one quota at once: each create or update stores a new
// resourceVersion, and an update carrying another one than the stored
// object's fails with a conflict. Without it the fake keeps whichever
// write came last, even one measured before a deletion.
func withResourceVersions(client *fake.Clientset) {
	last := 0 // guarded by the fake's lock, held around every reactor
	client.PrependReactor(
		"create",
		"resourcequotas",
		func(a clienttesting.Action) (bool, runtime.Object, error) {
			last++
			a.(clienttesting.CreateAction).GetObject().(*corev1.ResourceQuota).ResourceVersion = strconv.Itoa(
				last,
			)
			return false, nil, nil
		},
	)
	client.PrependReactor(
		"update",
		"resourcequotas",
		func(a clienttesting.Action) (bool, runtime.Object, error) {
			q := a.(clienttesting.UpdateAction).GetObject().(*corev1.ResourceQuota)
			stored, err := client.Tracker().Get(gvrQuotas, q.Namespace, q.Name)
			if err != nil {
				return false, nil, nil
			}
			if rv := stored.(*corev1.ResourceQuota).ResourceVersion; q.ResourceVersion != "" &&
				q.ResourceVersion != rv {
				return true, nil, apierrors.NewConflict(gvrQuotas.GroupResource(), q.Name,
					fmt.Errorf("resourceVersion %s, stored %s", q.ResourceVersion, rv))
			}
			last++
			q.ResourceVersion = strconv.Itoa(last)
			return false, nil, nil
		},
	)
}

// TestRediscoverStopIsNoError: a stop while rediscover waits for new
// monitors to sync logs no error; a timeout does.
func TestRediscoverStopIsNoError(t *testing.T) {
	tests := []struct {
		name      string
		stop      bool
		wantError bool
	}{
		{"stopped", true, false},
		{"timed out", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var errs []string
			log := funcr.New(func(prefix, args string) {
				if strings.Contains(args, `"error"=`) {
					mu.Lock()
					defer mu.Unlock()
					errs = append(errs, args)
				}
			}, funcr.Options{})
			ctx, cancel := context.WithCancel(logr.NewContext(t.Context(), log))
			defer cancel()
			// The factory is never started: the monitors never sync.
			factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
			c := &controller{discoveryPeriod: time.Millisecond}
			c.monitors = &monitors{
				factory:   typedOnly{factory},
				registry:  newRegistry(),
				replenish: func(schema.GroupResource, string) {},
			}
			c.discover = func() (map[schema.GroupVersionResource]struct{}, error) { return set(gvrSecrets), nil }
			if tt.stop {
				c.discoveryPeriod = time.Hour
				cancel()
			}
			c.rediscover()(ctx)
			mu.Lock()
			defer mu.Unlock()
			if got := len(errs) > 0; got != tt.wantError {
				t.Errorf("errors logged: %q; want an error: %v", errs, tt.wantError)
			}
		})
	}
}

// TestRediscover: each discovery that changes the quotable resources
// changes the monitors; a partial discovery failure keeps the resources of
// the groups that failed, a total one changes nothing.
func TestRediscover(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(t.Context())
	defer func() { cancel(); factory.Shutdown() }()
	var rep replenished
	c := &controller{discoveryPeriod: 30 * time.Second}
	c.monitors = &monitors{factory: typedOnly{factory}, registry: newRegistry(), replenish: rep.add}
	c.monitors.start(ctx.Done())
	type answer struct {
		found map[schema.GroupVersionResource]struct{}
		err   error
	}
	appsFailed := &discovery.ErrGroupDiscoveryFailed{
		Groups: map[schema.GroupVersion]error{
			appsv1.SchemeGroupVersion: errors.New("apps is down"),
		},
	}
	steps := []struct {
		name string
		answer
		want []schema.GroupVersionResource
	}{
		{"first discovery", answer{set(gvrPods), nil}, []schema.GroupVersionResource{gvrPods}},
		{
			"a new resource",
			answer{set(gvrPods, gvrDeployments), nil},
			[]schema.GroupVersionResource{gvrPods, gvrDeployments},
		},
		{
			"its group fails discovery",
			answer{set(gvrPods), appsFailed},
			[]schema.GroupVersionResource{gvrPods, gvrDeployments},
		},
		{
			"discovery fails",
			answer{nil, errors.New("down")},
			[]schema.GroupVersionResource{gvrPods, gvrDeployments},
		},
		{"the resource goes", answer{set(gvrPods), nil}, []schema.GroupVersionResource{gvrPods}},
	}
	var current answer
	c.discover = func() (map[schema.GroupVersionResource]struct{}, error) { return current.found, current.err }
	step := c.rediscover()
	for _, s := range steps {
		current = s.answer
		step(ctx)
		got := c.monitors.resources()
		if len(got) != len(s.want) {
			t.Errorf("%s: monitored %v, want %v", s.name, got, s.want)
			continue
		}
		for _, g := range s.want {
			if _, ok := got[g]; !ok {
				t.Errorf("%s: %v not monitored", s.name, g)
			}
		}
	}
	if c.monitors.registry.get(gvrDeployments.GroupResource()) == nil {
		t.Error("no object-count evaluator was added for deployments")
	}
}
