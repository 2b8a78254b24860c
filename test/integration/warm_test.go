//go:build integration

package integration

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/ctrlhost/ctrlhost/controllers/replicaset"
	"github.com/ctrlhost/ctrlhost/internal/poll"
	"github.com/ctrlhost/ctrlhost/leader"
	"github.com/ctrlhost/ctrlhost/manager"
	"github.com/ctrlhost/ctrlhost/serving"
)

// requests counts one manager's requests to the API server.
type requests struct {
	podSyncs atomic.Int32 // initial syncs of pods: a LIST, or a WATCH that sends initial events
	writes   atomic.Int32 // mutating requests other than leases and events
}

func (r *requests) wrap(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			switch {
			case req.Method == http.MethodGet && req.URL.Path == "/api/v1/pods" && (q.Get("watch") == "" || q.Get("sendInitialEvents") == "true"):
				r.podSyncs.Add(1)
			case req.Method != http.MethodGet && !strings.Contains(req.URL.Path, "/leases") && !strings.Contains(req.URL.Path, "/events"):
				r.writes.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	return c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestWarmStandbyFailover: with --leader-elect-warm-standby, a follower
// syncs the pods before it leads, writes nothing and builds no controller
// while it follows; when the leader stops, it acts on a probe ReplicaSet
// without listing the pods again.
func TestWarmStandbyFailover(t *testing.T) {
	env := sharedEnv(t)
	cs := clientset(t, env.Config())
	ctx := context.Background()
	ns := namespace(t, cs)
	// Nobody runs the service-account controller here, and the
	// ServiceAccount admission plugin refuses pods without the account.
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const pods = 300
	for i := range pods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lease := "it-warm-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	replica := func(identity string, reqs *requests) (*manager.Manager, context.CancelFunc) {
		t.Helper()
		m, err := manager.NewBuilder("it-warm").
			WithRESTConfig(reqs.wrap(env.Config())).
			WithOptions(manager.Options{
				Serving:        serving.Options{SecurePort: -1},
				LeaderElect:    true,
				LeaderElection: leader.Config{Identity: identity, Name: lease},
				WarmStandby:    true,
			}).
			Register(replicaset.Descriptor(replicaset.NewOptions())).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- m.Run(rctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: Run: %v", identity, err)
			}
		})
		return m, cancel
	}
	waits := poll.Within(rsTimeout)
	var aReqs, bReqs requests
	a, stopA := replica("a", &aReqs)
	waits.Until(t, "a leads and runs", func() bool {
		st, _ := a.Status(replicaset.ReplicaSetControllerName)
		return st.Phase == manager.PhaseRunning
	})
	b, _ := replica("b", &bReqs)
	waits.Until(t, "b's warm sync", func() bool { return bReqs.podSyncs.Load() == 1 })
	if st, _ := b.Status(replicaset.ReplicaSetControllerName); st.Phase != manager.PhaseWaiting {
		t.Errorf("follower b: %s, want waiting (not built)", st.Phase)
	}
	if n := bReqs.writes.Load(); n != 0 {
		t.Errorf("follower b made %d writes", n)
	}

	stopA()
	stopped := time.Now()
	probe := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"probe": "warm"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"probe": "warm"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if _, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waits.Until(t, "b acts on the probe", func() bool {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "probe=warm"})
		return err == nil && len(list.Items) == 1
	})
	t.Logf("leader stopped → probe pod created by b: %v", time.Since(stopped))
	if n := bReqs.podSyncs.Load(); n != 1 {
		t.Errorf("b synced the pods %d times; want once, as a follower, and its term on those caches", n)
	}
}
